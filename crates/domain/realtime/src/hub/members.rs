//! The hub's subscribers: how one joins, where it resumes, its queue, and
//! the key under which subscribers that see a table alike share a read.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use chrono::{DateTime, Utc};
use data::{Table, Watch};
use kernel::filter::{Filter, Operand};
use permissions::{Action, Principal};
use tokio::sync::mpsc;
use tokio::sync::mpsc::error::TrySendError;
use uuid::Uuid;

use super::OVERFLOWED;

/// Where a new subscriber starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Resume {
    /// With the next change.
    Live,
    /// After this event, replaying what it missed.
    After(i64),
    /// With a reset (a malformed `Last-Event-ID`).
    Reset,
}

/// A subscriber joining.
pub(crate) struct Join {
    /// Its slot among the user's streams (`svc.realtime_streams`).
    pub(crate) stream: Uuid,
    pub(crate) principal: Principal,
    /// When its credential expires: the stream ends then.
    pub(crate) expires_at: DateTime<Utc>,
    /// The `auth` version its credential was resolved at.
    pub(crate) auth_version: i64,
    pub(crate) watches: Vec<Watch>,
    pub(crate) bearer: String,
    pub(crate) zone_header: Option<String>,
    pub(crate) resume: Resume,
    pub(crate) sender: mpsc::Sender<Arc<str>>,
    pub(crate) ended: Arc<AtomicU8>,
    /// Told once the subscriber is in (true) or could not be taken (false):
    /// any change committed after that reaches it.
    pub(crate) admitted: Option<tokio::sync::oneshot::Sender<bool>>,
}

/// A subscriber in the hub.
pub(super) struct Member {
    pub(super) join: Join,
    /// Events up to this id were handled for it.
    pub(super) after: i64,
    /// The stream is over (refused or dropped); removed on the next pass.
    pub(super) gone: bool,
}

impl Member {
    /// Queues `frame`; a full queue drops the subscriber.
    pub(super) fn push(&mut self, frame: &Arc<str>) {
        match self.join.sender.try_send(frame.clone()) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                self.join.ended.store(OVERFLOWED, Ordering::Release);
                self.gone = true;
            }
            Err(TrySendError::Closed(_)) => self.gone = true,
        }
    }

    pub(super) fn watching(&self, resource: Uuid) -> Option<&Watch> {
        self.join
            .watches
            .iter()
            .find(|w| w.table.resource_id == resource)
    }
}

/// Subscribers with equal keys see `table` the same way: the same grants
/// and filter, and the same user or zone where those use `$USER` or `$PERIOD`.
pub(super) fn view_key(join: &Join, table: &Table, filter: Option<&Filter>) -> String {
    let principal = &join.principal;
    let grants: Vec<&Filter> = table
        .scopes
        .iter()
        .filter(|s| s.action == Action::Read && principal.role_ids.contains(&s.role_id))
        .filter_map(|s| s.filter.as_ref())
        .chain(filter)
        .collect();
    let uses = |test: &dyn Fn(&Operand) -> bool| grants.iter().any(|f| f.mentions(&test));
    let mut roles = principal.role_ids.clone();
    roles.sort_unstable();
    let user = uses(&|o| matches!(o, Operand::User(_))).then_some(principal.user_id);
    let zone = uses(&|o| matches!(o, Operand::Period(_)))
        .then(|| (principal.timezone.clone(), join.zone_header.clone()));
    format!("{}|{roles:?}|{user:?}|{zone:?}|{filter:?}", principal.admin)
}
