//! The caller's time zone and the instants `$PERIOD.*` stands for.

use chrono::{DateTime, Datelike, Days, NaiveDate, TimeZone, Utc};
use chrono_tz::Tz;

/// Chooses the caller's zone in the spec's order: the user's preference,
/// `system.timezone`, the `X-Service-Timezone` header, UTC. A name that is
/// not an IANA zone is skipped, not an error.
pub fn caller_zone(user: Option<&str>, system: Option<&str>, header: Option<&str>) -> Tz {
    [user, system, header]
        .into_iter()
        .flatten()
        .find_map(|name| name.parse::<Tz>().ok())
        .unwrap_or(Tz::UTC)
}

/// What a `$PERIOD.*` variable stands for: a span `[start, end)`; an instant
/// (`now`, `startOf*`) has `start == end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Period {
    /// First instant.
    pub start: DateTime<Tz>,
    /// First instant after the span.
    pub end: DateTime<Tz>,
}

impl Period {
    /// Resolves `name` (one of [`kernel::filter::PERIODS`]) at `now` in `zone`.
    pub fn resolve(name: &str, now: DateTime<Utc>, zone: Tz) -> Self {
        let local = now.with_timezone(&zone);
        let today = local.date_naive();
        let day = |date: NaiveDate| Period {
            start: midnight(date, zone),
            end: midnight(date + Days::new(1), zone),
        };
        let instant = |at: DateTime<Tz>| Period { start: at, end: at };
        match name {
            "today" => day(today),
            "yesterday" => day(today - Days::new(1)),
            "tomorrow" => day(today + Days::new(1)),
            "startOfWeek" => instant(midnight(
                today - Days::new(u64::from(today.weekday().num_days_from_monday())),
                zone,
            )),
            "startOfMonth" => instant(midnight(today.with_day(1).unwrap_or(today), zone)),
            "startOfYear" => instant(midnight(
                NaiveDate::from_ymd_opt(today.year(), 1, 1).unwrap_or(today),
                zone,
            )),
            _ => instant(local),
        }
    }

    /// Whether the variable names a span rather than an instant.
    pub fn is_span(&self) -> bool {
        self.start != self.end
    }
}

/// The first instant of `date` in `zone` (a day starting in a DST gap starts
/// at the first instant that exists).
fn midnight(date: NaiveDate, zone: Tz) -> DateTime<Tz> {
    let mut at = date.and_time(chrono::NaiveTime::MIN);
    for _ in 0..4 {
        if let Some(t) = zone.from_local_datetime(&at).earliest() {
            return t;
        }
        at += chrono::Duration::minutes(30);
    }
    zone.from_utc_datetime(&at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn precedence_skips_bad_names() {
        assert_eq!(
            caller_zone(Some("Pacific/Auckland"), Some("Europe/Paris"), None),
            Tz::Pacific__Auckland
        );
        assert_eq!(
            caller_zone(None, Some("Europe/Paris"), Some("Asia/Tokyo")),
            Tz::Europe__Paris
        );
        assert_eq!(caller_zone(None, None, Some("Asia/Tokyo")), Tz::Asia__Tokyo);
        assert_eq!(caller_zone(None, None, Some("Mars/Base")), Tz::UTC);
    }

    #[test]
    fn days_are_cut_in_the_zone() {
        let now = Utc.with_ymd_and_hms(2026, 3, 10, 20, 0, 0).unwrap();
        let auckland = Period::resolve("today", now, Tz::Pacific__Auckland);
        assert_eq!(auckland.start.to_rfc3339(), "2026-03-11T00:00:00+13:00");
        assert_eq!(auckland.end.to_rfc3339(), "2026-03-12T00:00:00+13:00");
        let la = Period::resolve("today", now, Tz::America__Los_Angeles);
        assert_eq!(la.start.to_rfc3339(), "2026-03-10T00:00:00-07:00");
        let week = Period::resolve("startOfWeek", now, Tz::UTC);
        assert_eq!(week.start.to_rfc3339(), "2026-03-09T00:00:00+00:00");
        assert!(!week.is_span());
        assert_eq!(
            Period::resolve("startOfYear", now, Tz::UTC)
                .start
                .to_rfc3339(),
            "2026-01-01T00:00:00+00:00"
        );
        assert_eq!(Period::resolve("now", now, Tz::UTC).start, now);
    }
}
