//! The CSV export streams one caller holds on this instance (API.md 17): at
//! most [`PER_CALLER`] at once, so that one reader cannot take every stream
//! the instance allows; a slot is freed when its stream is dropped.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use kernel::StoreError;
use uuid::Uuid;

use crate::query::Chunks;

/// Export streams one caller (a user, whatever its credential) holds at once.
pub const PER_CALLER: usize = 2;
/// Seconds a refused caller is told to wait.
pub(crate) const RETRY_AFTER: u64 = 5;

/// The export streams of each caller, on this instance.
#[derive(Debug, Default)]
pub(crate) struct ExportSlots(Mutex<HashMap<Uuid, usize>>);

impl ExportSlots {
    /// One of `user`'s slots, or `None` while it holds [`PER_CALLER`].
    pub(crate) fn take(self: &Arc<Self>, user: Uuid) -> Option<ExportSlot> {
        let mut held = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let count = held.entry(user).or_default();
        if *count >= PER_CALLER {
            return None;
        }
        *count += 1;
        Some(ExportSlot {
            slots: self.clone(),
            user,
        })
    }
}

/// A caller's export slot, given back when dropped.
#[derive(Debug)]
pub(crate) struct ExportSlot {
    slots: Arc<ExportSlots>,
    user: Uuid,
}

impl Drop for ExportSlot {
    fn drop(&mut self) {
        let mut held = self
            .slots
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(count) = held.get_mut(&self.user) {
            *count -= 1;
            if *count == 0 {
                held.remove(&self.user);
            }
        }
    }
}

/// A CSV export streaming: its pieces, with the caller's slot held until
/// the stream is dropped.
#[derive(Debug)]
pub struct Export {
    chunks: Chunks,
    _slot: ExportSlot,
}

impl Export {
    pub(crate) fn new(chunks: Chunks, slot: ExportSlot) -> Self {
        Self {
            chunks,
            _slot: slot,
        }
    }

    /// The next piece of CSV; `None` at the end.
    pub async fn recv(&mut self) -> Option<Result<Vec<u8>, StoreError>> {
        self.chunks.recv().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_caller_holds_two_slots_and_gets_one_back_when_dropped() {
        let slots = Arc::new(ExportSlots::default());
        let (ann, bob) = (Uuid::now_v7(), Uuid::now_v7());
        let first = slots.take(ann).expect("first");
        let _second = slots.take(ann).expect("second");
        assert!(slots.take(ann).is_none());
        assert!(slots.take(bob).is_some());
        drop(first);
        assert!(slots.take(ann).is_some());
    }
}
