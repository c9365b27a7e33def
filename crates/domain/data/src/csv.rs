//! CSV as the Data API reads and writes it (RFC 4180, API.md 13): CRLF
//! line ends on output (CRLF or LF read), UTF-8 without a BOM, NULL as an
//! empty unquoted field, an empty string as `""`. The reader takes its
//! input in pieces, so a body is never held whole.

/// Appends one field; `None` is NULL.
pub fn write_field(out: &mut Vec<u8>, first: bool, field: Option<&str>) {
    if !first {
        out.push(b',');
    }
    let Some(text) = field else { return };
    if text.is_empty()
        || text
            .bytes()
            .any(|b| matches!(b, b',' | b'"' | b'\r' | b'\n'))
    {
        out.push(b'"');
        for byte in text.bytes() {
            if byte == b'"' {
                out.push(b'"');
            }
            out.push(byte);
        }
        out.push(b'"');
    } else {
        out.extend_from_slice(text.as_bytes());
    }
}

/// Ends a record.
pub fn end_record(out: &mut Vec<u8>) {
    out.extend_from_slice(b"\r\n");
}

/// One record: its fields (`None`: an empty unquoted field, NULL) and its
/// number, 1 being the first (the header).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// The record's number.
    pub line: u64,
    /// Its fields.
    pub fields: Vec<Option<String>>,
}

/// Why the input is not CSV, with the record's number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CsvError {
    /// The record's number.
    pub line: u64,
    /// What is wrong.
    pub message: &'static str,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// At the start of a field.
    FieldStart,
    /// Inside an unquoted field.
    Unquoted,
    /// Inside a quoted field.
    Quoted,
    /// After a quote inside a quoted field: a second quote or the field's end.
    QuoteInQuoted,
    /// After a quoted field's closing quote.
    AfterQuoted,
    /// After a CR ending a record: an LF may follow.
    AfterCr,
}

/// Reads records from pieces of input.
#[derive(Debug)]
pub struct Reader {
    state: State,
    field: Vec<u8>,
    quoted: bool,
    fields: Vec<Option<String>>,
    line: u64,
    started: bool,
    /// Longest field accepted, in bytes.
    field_max: usize,
    /// Bytes of the record being read.
    record_bytes: usize,
}

/// Most fields in a record (PostgreSQL's most columns in a table).
const FIELDS_MAX: usize = 1600;
/// Longest record, in bytes.
const RECORD_MAX: usize = 8 << 20;

impl Reader {
    /// A reader refusing fields longer than `field_max` bytes.
    pub fn new(field_max: usize) -> Self {
        Self {
            state: State::FieldStart,
            field: Vec::new(),
            quoted: false,
            fields: Vec::new(),
            line: 1,
            started: false,
            field_max,
            record_bytes: 0,
        }
    }

    /// Reads `bytes`, appending every record they complete to `out`.
    pub fn feed(&mut self, mut bytes: &[u8], out: &mut Vec<Record>) -> Result<(), CsvError> {
        if !self.started {
            self.started = !bytes.is_empty();
            bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
        }
        for &byte in bytes {
            self.byte(byte, out)?;
        }
        Ok(())
    }

    /// Ends the input: the last record, when it has no line end.
    pub fn finish(mut self, out: &mut Vec<Record>) -> Result<(), CsvError> {
        match self.state {
            State::Quoted => Err(self.error("a quoted field is not closed")),
            State::AfterCr => Ok(()),
            State::FieldStart if self.fields.is_empty() => Ok(()),
            _ => self.end_record(out),
        }
    }

    fn error(&self, message: &'static str) -> CsvError {
        CsvError {
            line: self.line,
            message,
        }
    }

    fn byte(&mut self, byte: u8, out: &mut Vec<Record>) -> Result<(), CsvError> {
        match (self.state, byte) {
            (State::AfterCr, b'\n') => {
                self.state = State::FieldStart;
                return Ok(());
            }
            (State::AfterCr, _) => {
                self.state = State::FieldStart;
                return self.byte(byte, out);
            }
            (State::FieldStart, b'"') => {
                self.quoted = true;
                self.state = State::Quoted;
            }
            (State::FieldStart | State::Unquoted | State::AfterQuoted, b',') => self.end_field()?,
            (State::FieldStart | State::Unquoted | State::AfterQuoted, b'\r' | b'\n') => {
                self.end_record(out)?;
                self.state = if byte == b'\r' {
                    State::AfterCr
                } else {
                    State::FieldStart
                };
            }
            (State::Unquoted, b'"') => {
                return Err(self.error("a quote inside an unquoted field"));
            }
            (State::FieldStart | State::Unquoted, _) => {
                self.push(byte)?;
                self.state = State::Unquoted;
            }
            (State::Quoted, b'"') => self.state = State::QuoteInQuoted,
            (State::Quoted, _) => self.push(byte)?,
            (State::QuoteInQuoted, b'"') => {
                self.push(b'"')?;
                self.state = State::Quoted;
            }
            (State::QuoteInQuoted, _) => {
                self.state = State::AfterQuoted;
                return self.byte(byte, out);
            }
            (State::AfterQuoted, _) => {
                return Err(self.error("text after a quoted field's closing quote"));
            }
        }
        Ok(())
    }

    fn push(&mut self, byte: u8) -> Result<(), CsvError> {
        if self.field.len() >= self.field_max {
            return Err(self.error("a field is too long"));
        }
        self.record_bytes += 1;
        if self.record_bytes > RECORD_MAX {
            return Err(self.error("a record is too long"));
        }
        self.field.push(byte);
        Ok(())
    }

    fn end_field(&mut self) -> Result<(), CsvError> {
        if self.fields.len() >= FIELDS_MAX {
            return Err(self.error("a record has too many fields"));
        }
        let bytes = std::mem::take(&mut self.field);
        let field = if bytes.is_empty() && !self.quoted {
            None
        } else {
            Some(String::from_utf8(bytes).map_err(|_| self.error("a field is not UTF-8"))?)
        };
        self.fields.push(field);
        self.quoted = false;
        self.state = State::FieldStart;
        Ok(())
    }

    fn end_record(&mut self, out: &mut Vec<Record>) -> Result<(), CsvError> {
        self.end_field()?;
        out.push(Record {
            line: self.line,
            fields: std::mem::take(&mut self.fields),
        });
        self.record_bytes = 0;
        self.line += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn write(records: &[Vec<Option<String>>]) -> Vec<u8> {
        let mut out = Vec::new();
        for record in records {
            for (i, field) in record.iter().enumerate() {
                write_field(&mut out, i == 0, field.as_deref());
            }
            end_record(&mut out);
        }
        out
    }

    fn read(bytes: &[u8], piece: usize) -> Result<Vec<Record>, CsvError> {
        let mut reader = Reader::new(1 << 20);
        let mut out = Vec::new();
        for chunk in bytes.chunks(piece.max(1)) {
            reader.feed(chunk, &mut out)?;
        }
        reader.finish(&mut out)?;
        Ok(out)
    }

    #[test]
    fn reads_quotes_nulls_and_line_ends() {
        let text = b"\xEF\xBB\xBFa,b,c\r\n1,,\"\"\n\"x,\"\"y\"\"\r\nz\",2,3";
        let records = read(text, 3).unwrap();
        assert_eq!(records.len(), 3);
        assert_eq!(
            records[0].fields,
            vec![Some("a".into()), Some("b".into()), Some("c".into())]
        );
        assert_eq!(
            records[1].fields,
            vec![Some("1".into()), None, Some(String::new())]
        );
        assert_eq!(records[2].line, 3);
        assert_eq!(records[2].fields[0].as_deref(), Some("x,\"y\"\r\nz"));
        assert_eq!(read(b"a\n\"b", 1).unwrap_err().line, 2);
        assert_eq!(read(b"a\nb\"c", 1).unwrap_err().line, 2);
        assert_eq!(
            read(b"\"a\"b", 1).unwrap_err().message,
            "text after a quoted field's closing quote"
        );
        assert_eq!(
            write(&[vec![None, Some(String::new()), Some("a\"b".into())]]),
            b",\"\",\"a\"\"b\"\r\n"
        );
        assert_eq!(
            read(&[b','; 5000], 512).unwrap_err().message,
            "a record has too many fields"
        );
    }

    proptest! {
        /// Whatever is written reads back the same, however the input is cut.
        #[test]
        fn what_is_written_reads_back(
            records in prop::collection::vec(
                prop::collection::vec(prop::option::of("[a-z,\" \r\n\u{e9}]{0,6}"), 1..4), 1..6),
            piece in 1usize..9,
        ) {
            let bytes = write(&records);
            let read = read(&bytes, piece).unwrap();
            let fields: Vec<Vec<Option<String>>> = read.into_iter().map(|r| r.fields).collect();
            prop_assert_eq!(fields, records);
        }
    }
}
