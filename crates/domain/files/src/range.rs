//! The `Range` header of a download: one range of bytes (`bytes=0-99`,
//! `bytes=100-`, `bytes=-100`); several ranges, or another unit, get the
//! whole file, as RFC 9110 allows.

use crate::error::FileError;

/// A satisfiable range: first and last byte, inclusive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteRange {
    /// First byte.
    pub start: u64,
    /// Last byte (inclusive).
    pub end: u64,
}

impl ByteRange {
    /// Its length in bytes.
    pub fn len(&self) -> u64 {
        self.end - self.start + 1
    }

    /// Never: a range holds at least one byte.
    pub fn is_empty(&self) -> bool {
        false
    }
}

/// What a download asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RangeRequest {
    /// The whole file.
    #[default]
    All,
    /// From `first` (to `last`, or the end).
    From {
        /// First byte.
        first: u64,
        /// Last byte, inclusive.
        last: Option<u64>,
    },
    /// The last `length` bytes.
    Suffix {
        /// How many.
        length: u64,
    },
}

impl RangeRequest {
    /// Reads a `Range` header.
    pub fn parse(header: Option<&str>) -> Self {
        let Some(spec) = header.and_then(|h| h.trim().strip_prefix("bytes=")) else {
            return Self::All;
        };
        if spec.contains(',') {
            return Self::All;
        }
        let Some((first, last)) = spec.trim().split_once('-') else {
            return Self::All;
        };
        match (first.trim(), last.trim()) {
            ("", "") => Self::All,
            ("", length) => length
                .parse()
                .map_or(Self::All, |length| Self::Suffix { length }),
            (first, "") => first
                .parse()
                .map_or(Self::All, |first| Self::From { first, last: None }),
            (first, last) => match (first.parse(), last.parse()) {
                (Ok(first), Ok(last)) if first <= last => Self::From {
                    first,
                    last: Some(last),
                },
                _ => Self::All,
            },
        }
    }

    /// The bytes to send of a file `size` long: `None` for all of it;
    /// [`FileError::RangeNotSatisfiable`] for a range outside it.
    pub fn resolve(self, size: u64) -> Result<Option<ByteRange>, FileError> {
        let unsatisfiable = FileError::RangeNotSatisfiable(size);
        match self {
            Self::All => Ok(None),
            Self::From { first, .. } if first >= size => Err(unsatisfiable),
            Self::From { first, last } => Ok(Some(ByteRange {
                start: first,
                end: last.map_or(size - 1, |l| l.min(size - 1)),
            })),
            Self::Suffix { length: 0 } => Err(unsatisfiable),
            Self::Suffix { .. } if size == 0 => Err(unsatisfiable),
            Self::Suffix { length } => Ok(Some(ByteRange {
                start: size.saturating_sub(length),
                end: size - 1,
            })),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolved(header: &str, size: u64) -> Result<Option<(u64, u64)>, FileError> {
        RangeRequest::parse(Some(header))
            .resolve(size)
            .map(|r| r.map(|r| (r.start, r.end)))
    }

    #[test]
    fn single_ranges_are_served_and_others_get_the_whole_file() {
        assert_eq!(resolved("bytes=0-9", 100).unwrap(), Some((0, 9)));
        assert_eq!(resolved("bytes=90-", 100).unwrap(), Some((90, 99)));
        assert_eq!(resolved("bytes=90-500", 100).unwrap(), Some((90, 99)));
        assert_eq!(resolved("bytes=-10", 100).unwrap(), Some((90, 99)));
        assert_eq!(resolved("bytes=-500", 100).unwrap(), Some((0, 99)));
        for whole in [
            "bytes=0-1,5-6",
            "items=0-1",
            "bytes=5-1",
            "bytes=x-",
            "bytes=-",
        ] {
            assert_eq!(resolved(whole, 100).unwrap(), None, "{whole}");
        }
        for refused in ["bytes=100-", "bytes=-0", "bytes=200-300"] {
            assert!(
                matches!(
                    resolved(refused, 100),
                    Err(FileError::RangeNotSatisfiable(100))
                ),
                "{refused}"
            );
        }
        assert!(resolved("bytes=0-0", 0).is_err());
        assert_eq!(RangeRequest::parse(None).resolve(0).unwrap(), None);
    }
}
