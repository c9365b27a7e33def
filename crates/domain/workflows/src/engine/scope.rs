//! A run's scope: what templates see.

use super::*;

/// What templates see: the run's context, or a loop iteration's `item`,
/// `index` and `steps` over the scope it runs in.
pub(super) struct Scope<'p> {
    pub(super) parent: Option<&'p Scope<'p>>,
    /// An object: the run's context, or `{ item, index, steps }`.
    pub(super) vars: Value,
    /// The index of each enclosing iteration, outermost first.
    pub(super) iteration: Vec<usize>,
    /// Set when a sibling iteration ended the loop: take no further step.
    pub(super) halt: Option<&'p AtomicBool>,
}

impl Scope<'_> {
    pub(super) fn halted(&self) -> bool {
        let mut scope = Some(self);
        while let Some(at) = scope {
            if at.halt.is_some_and(|h| h.load(Ordering::Relaxed)) {
                return true;
            }
            scope = at.parent;
        }
        false
    }

    pub(super) fn set_step(&mut self, id: &str, entry: Value) {
        if let Some(steps) = self.vars.get_mut("steps").and_then(Value::as_object_mut) {
            steps.insert(id.to_owned(), entry);
        }
    }
}

impl Scope<'_> {
    /// Everything templates see as one object: the run's `start` and
    /// `user`, every step's entry in reach, and the innermost loop's
    /// `item` and `index`.
    pub(super) fn seen(&self) -> Value {
        let mut chain = Vec::new();
        let mut scope = Some(self);
        while let Some(at) = scope {
            chain.push(at);
            scope = at.parent;
        }
        let mut seen = Map::new();
        let mut steps = Map::new();
        for at in chain.into_iter().rev() {
            if let Some(vars) = at.vars.as_object() {
                for (key, value) in vars {
                    if key == "steps" {
                        if let Some(entries) = value.as_object() {
                            steps.extend(entries.iter().map(|(k, v)| (k.clone(), v.clone())));
                        }
                    } else {
                        seen.insert(key.clone(), value.clone());
                    }
                }
            }
        }
        seen.insert("steps".into(), Value::Object(steps));
        Value::Object(seen)
    }
}

impl Context for Scope<'_> {
    fn value_at(&self, path: &str) -> Option<&Value> {
        let mut segments = path.split('.');
        let root = segments.next()?;
        let mut scope = Some(self);
        if root == "steps" {
            let Some(id) = segments.next() else {
                return self.vars.get("steps");
            };
            while let Some(at) = scope {
                if let Some(entry) = at.vars.get("steps").and_then(|steps| steps.get(id)) {
                    return descend(entry, segments);
                }
                scope = at.parent;
            }
            return None;
        }
        while let Some(at) = scope {
            if let Some(value) = at.vars.get(root) {
                return descend(value, segments);
            }
            scope = at.parent;
        }
        None
    }
}
