//! Schedule triggers: which ticks of a due schedule start a run, and the
//! loop that claims them. A tick is claimed by moving the workflow's next
//! tick on in the same statement that stores its run (compare-and-set),
//! so each tick runs once however many instances run; a unique index on
//! the run's tick guards it again.

use std::time::Duration;

use chrono::{DateTime, SubsecRound, Utc};
use chrono_tz::Tz;

use crate::error::WorkflowError;
use crate::model::{Definition, Schedule, Trigger};
use crate::service::WorkflowService;
use crate::store::{ScheduleRecord, TickClaim};

/// A tick this close to the last pass of any instance (or to now) is on
/// time; older ones were missed (no instance ran) and are not made up, but
/// for the latest with `catchUp`.
const ON_TIME: chrono::Duration = chrono::Duration::seconds(2);
/// A gap between two passes up to this long is a stall of running
/// instances (their ticks run late); a longer one is a time no instance ran.
const STALL_MAX: chrono::Duration = chrono::Duration::seconds(30);
/// Most on-time ticks one claim starts.
const TICKS_MAX: usize = 100;
/// Schedules read per pass (those due within the pass).
const SCHEDULES_MAX: u64 = 1000;
/// The longest sleep between passes: a newly published schedule is seen
/// within this.
const PASS_MAX: Duration = Duration::from_secs(1);

/// What a due schedule runs now, and its next tick.
#[derive(Debug, PartialEq)]
pub(crate) struct Due {
    /// Ticks to start a run for, oldest first.
    pub(crate) ticks: Vec<DateTime<Utc>>,
    /// The first tick after now.
    pub(crate) next_at: DateTime<Utc>,
}

/// The oldest on-time tick at `now`, when the pass before this one (of
/// any instance) ran at `previous`.
pub(crate) fn on_time_since(previous: DateTime<Utc>, now: DateTime<Utc>) -> DateTime<Utc> {
    let late = now.trunc_subsecs(0) - ON_TIME;
    if now - previous <= STALL_MAX {
        late.min(previous.trunc_subsecs(0) - ON_TIME)
    } else {
        late
    }
}

/// The ticks of `schedule` due at `now` when `next_at` is the first not
/// yet run and ticks before `cutoff` were missed; `None` when the
/// expression has no tick after now.
pub(crate) fn due(
    schedule: &Schedule,
    zone: Tz,
    next_at: DateTime<Utc>,
    now: DateTime<Utc>,
    cutoff: DateTime<Utc>,
) -> Option<Due> {
    let now = now.trunc_subsecs(0);
    let mut ticks = Vec::new();
    if next_at < cutoff
        && schedule.catch_up
        && let Some(missed) =
            schedule.tick_at_or_before(cutoff - chrono::Duration::seconds(1), zone)
        && missed >= next_at
    {
        ticks.push(missed);
    }
    let from = next_at.max(cutoff);
    let mut tick = schedule.tick_at_or_after(from, zone);
    while let Some(at) = tick.filter(|at| *at <= now && ticks.len() < TICKS_MAX) {
        ticks.push(at);
        tick = schedule.ticks_after(at, zone, 1).into_iter().next();
    }
    let next_at = schedule.ticks_after(now, zone, 1).into_iter().next()?;
    Some(Due { ticks, next_at })
}

impl WorkflowService {
    /// The first tick of a published schedule trigger, after now.
    pub(crate) async fn first_tick(
        &self,
        definition: &Definition,
    ) -> Result<Option<DateTime<Utc>>, WorkflowError> {
        let Trigger::Schedule(schedule) = &definition.trigger else {
            return Ok(None);
        };
        let zone = self.zone(schedule).await?;
        Ok(schedule
            .ticks_after(self.ports.clock.now(), zone, 1)
            .into_iter()
            .next())
    }

    /// The next `count` ticks of a schedule trigger (the console shows five).
    pub async fn preview_schedule(
        &self,
        trigger: &serde_json::Value,
        count: usize,
    ) -> Result<Vec<DateTime<Utc>>, WorkflowError> {
        let definition = Definition::parse(trigger, &serde_json::json!([]), u64::MAX)?;
        let Trigger::Schedule(schedule) = &definition.trigger else {
            return Err(kernel::FieldError::new("trigger.type", "must be schedule").into());
        };
        let zone = self.zone(schedule).await?;
        Ok(schedule.ticks_after(self.ports.clock.now(), zone, count.min(20)))
    }

    /// The zone a schedule reads its ticks in: its own, else
    /// `system.timezone`, else UTC.
    async fn zone(&self, schedule: &Schedule) -> Result<Tz, WorkflowError> {
        let settings = self.settings.current().await?;
        let system = settings
            .system_timezone()
            .and_then(|zone| zone.parse().ok())
            .unwrap_or(Tz::UTC);
        Ok(schedule.zone(system))
    }

    /// Starts the runs of due ticks until the process stops or
    /// [`WorkflowService::drain`] begins, sleeping until the soonest tick.
    pub async fn schedule(self) {
        while !self.stopping.load(std::sync::atomic::Ordering::Relaxed) {
            let sleep = match self.schedule_pass().await {
                Ok(sleep) => sleep,
                Err(error) => {
                    tracing::warn!(?error, "workflow schedule pass failed");
                    PASS_MAX
                }
            };
            tokio::time::sleep(sleep).await;
        }
    }

    /// Claims the due ticks of every schedule and starts their runs;
    /// answers how long to sleep until the soonest next tick. A schedule
    /// that cannot be claimed is logged and left to the next pass.
    pub async fn schedule_pass(&self) -> Result<Duration, WorkflowError> {
        let previous = self.store.schedule_pass().await?;
        let now = self.ports.clock.now();
        let cutoff = on_time_since(previous, now);
        let mut soonest = now + chrono::Duration::from_std(PASS_MAX).unwrap_or_default();
        let schedules = self.store.schedules(PASS_MAX, SCHEDULES_MAX).await?;
        let allow_private = self.settings.heeded().await?.http_allow_private();
        for record in schedules {
            if record.next_at > now {
                soonest = soonest.min(record.next_at);
                continue;
            }
            match self.claim(record, now, cutoff, allow_private).await {
                Ok(Some(next_at)) => soonest = soonest.min(next_at),
                Ok(None) => {}
                Err(error) => tracing::warn!(?error, "a schedule's ticks could not be claimed"),
            }
        }
        Ok((soonest - self.ports.clock.now())
            .to_std()
            .unwrap_or_default()
            .min(PASS_MAX))
    }

    /// Claims one due schedule's ticks and starts their runs without
    /// waiting for a free slot (the runs are stored already); answers its
    /// next tick.
    async fn claim(
        &self,
        record: ScheduleRecord,
        now: DateTime<Utc>,
        cutoff: DateTime<Utc>,
        allow_private: bool,
    ) -> Result<Option<DateTime<Utc>>, WorkflowError> {
        let Ok(definition) = Definition::from_stored(&record.definition) else {
            return Ok(None);
        };
        let Trigger::Schedule(schedule) = &definition.trigger else {
            return Ok(None);
        };
        let zone = self.zone(schedule).await?;
        let Some(due) = due(schedule, zone, record.next_at, now, cutoff) else {
            self.store
                .set_schedule(record.id, None, Some(record.next_at))
                .await?;
            return Ok(None);
        };
        let next_at = due.next_at;
        let claim = TickClaim {
            workflow_id: record.id,
            expected: record.next_at,
            next_at,
            ticks: due.ticks,
            run_as: schedule.execute_as,
        };
        let claimed = self
            .store
            .claim_ticks(claim, self.owner, self.options.lease)
            .await?;
        for run in claimed {
            let service = self.clone();
            tokio::spawn(async move { service.resume(run, allow_private).await });
        }
        Ok(Some(next_at))
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;

    fn schedule(cron: &str, catch_up: bool) -> Schedule {
        Schedule {
            cron: cron.into(),
            timezone: None,
            catch_up,
            execute_as: uuid::Uuid::nil(),
        }
    }

    fn at(h: u32, m: u32, s: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 27, h, m, s).unwrap()
    }

    /// `due` with the passes of running instances: the one before now.
    fn due_now(schedule: &Schedule, next_at: DateTime<Utc>, now: DateTime<Utc>) -> Option<Due> {
        due(schedule, Tz::UTC, next_at, now, on_time_since(now, now))
    }

    #[test]
    fn an_on_time_tick_runs_and_the_next_follows() {
        let due = due_now(&schedule("*/5 * * * *", false), at(10, 5, 0), at(10, 5, 1)).unwrap();
        assert_eq!(due.ticks, vec![at(10, 5, 0)]);
        assert_eq!(due.next_at, at(10, 10, 0));
    }

    #[test]
    fn missed_ticks_are_skipped_but_the_latest_with_catch_up() {
        // No instance ran since 06:00: the pass before is hours old.
        let cutoff = on_time_since(at(6, 0, 0), at(10, 30, 0));
        let hourly = |catch_up| schedule("0 * * * *", catch_up);
        let missed = due(&hourly(false), Tz::UTC, at(6, 0, 0), at(10, 30, 0), cutoff).unwrap();
        assert!(missed.ticks.is_empty());
        assert_eq!(missed.next_at, at(11, 0, 0));
        let caught = due(&hourly(true), Tz::UTC, at(6, 0, 0), at(10, 30, 0), cutoff).unwrap();
        assert_eq!(caught.ticks, vec![at(10, 0, 0)]);
    }

    #[test]
    fn the_ticks_of_a_stall_run_late_and_none_twice() {
        let every = schedule("* * * * * *", false);
        let stalled = on_time_since(at(10, 0, 0), at(10, 0, 20));
        let late = due(&every, Tz::UTC, at(10, 0, 1), at(10, 0, 20), stalled).unwrap();
        assert_eq!(late.ticks.len(), 20);
        assert_eq!(late.ticks[0], at(10, 0, 1));
        assert_eq!(late.next_at, at(10, 0, 21));
    }

    #[test]
    fn ticks_fall_on_whole_seconds_whatever_the_time_read() {
        let every = schedule("* * * * * *", false);
        let late = at(10, 0, 40) + chrono::Duration::milliseconds(300);
        assert_eq!(every.ticks_after(late, Tz::UTC, 1), vec![at(10, 0, 41)]);
        assert_eq!(every.tick_at_or_after(late, Tz::UTC), Some(at(10, 0, 41)));
        assert_eq!(every.tick_at_or_before(late, Tz::UTC), Some(at(10, 0, 40)));
        let first = every.ticks_after(late, Tz::UTC, 1)[0];
        let now = first + chrono::Duration::milliseconds(5);
        let cutoff = on_time_since(now, now);
        assert_eq!(
            due(&every, Tz::UTC, first, now, cutoff).unwrap().ticks,
            vec![first]
        );
    }

    #[test]
    fn seconds_and_zones_are_read() {
        let every_two = due_now(
            &schedule("*/2 * * * * *", false),
            at(10, 0, 2),
            at(10, 0, 3),
        )
        .unwrap();
        assert_eq!(every_two.ticks, vec![at(10, 0, 2)]);
        assert_eq!(every_two.next_at, at(10, 0, 4));
        let paris: Tz = "Europe/Paris".parse().unwrap();
        let nine = schedule("0 9 * * *", false).ticks_after(at(0, 0, 0), paris, 1);
        assert_eq!(
            nine,
            vec![at(8, 0, 0)],
            "09:00 in Paris is 08:00 UTC in winter"
        );
    }
}
