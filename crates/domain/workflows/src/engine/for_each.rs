//! `forEach`: iterations at once, up to the loop's concurrency.

use super::*;

impl Walk<'_> {
    /// A loop: each item's iteration in its own scope, up to `concurrency`
    /// at once; the result is each iteration's last result, in item order.
    pub(super) async fn for_each(
        &self,
        each: &ForEach,
        scope: &Scope<'_>,
    ) -> Result<Flow, StoreError> {
        let items = match render(&each.items, scope) {
            Value::Array(items) if items.len() <= FOR_EACH_ITEMS_MAX => items,
            Value::Array(items) => {
                return Ok(Flow::Fail(RunError::new(
                    INVALID_PAYLOAD,
                    format!(
                        "forEach got {} items; at most {FOR_EACH_ITEMS_MAX} are allowed",
                        items.len()
                    ),
                )));
            }
            _ => {
                return Ok(Flow::Fail(RunError::new(
                    INVALID_PAYLOAD,
                    "forEach items must give an array",
                )));
            }
        };
        let count = items.len();
        let halt = AtomicBool::new(false);
        let halt = &halt;
        let iterations = items.into_iter().enumerate().map(|(index, item)| {
            let mut iteration = scope.iteration.clone();
            iteration.push(index);
            let mut vars = Map::new();
            vars.insert("item".into(), item);
            vars.insert("index".into(), index.into());
            vars.insert("steps".into(), Value::Object(Map::new()));
            async move {
                // A loop of pure steps never waits: let other tasks in.
                tokio::task::yield_now().await;
                let mut inner = Scope {
                    parent: Some(scope),
                    vars: Value::Object(vars),
                    iteration,
                    halt: Some(halt),
                };
                self.list(&each.steps, &mut inner).await
            }
        });
        let mut running =
            futures_util::stream::iter(iterations).buffered(each.concurrency as usize);
        let mut results = Vec::with_capacity(count);
        let mut ended = None;
        // An iteration that ends the loop halts the others at their next
        // step; those under way finish the step they are in.
        while let Some(flow) = running.next().await {
            match (flow?, &ended) {
                (Flow::Next(result), None) => results.push(result),
                (Flow::Next(_), Some(_)) => {}
                (other, None) => {
                    halt.store(true, Ordering::Relaxed);
                    ended = Some(other);
                }
                (_, Some(_)) => {}
            }
        }
        if let Some(ended) = ended {
            return Ok(ended);
        }
        Ok(Flow::Next(Value::Array(results)))
    }
}
