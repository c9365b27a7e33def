//! What each step type does: one function per type (`forEach` and `call`
//! in files of their own).

use super::*;
use crate::model::{Condition, Delay, Delete, Fail, Http, Insert, Query, Script, Update};

impl Walk<'_> {
    /// What one attempt of a step does.
    pub(super) async fn action(
        &self,
        step: &Step,
        scope: &mut Scope<'_>,
        record: &mut StepRecord,
    ) -> Result<Flow, StoreError> {
        let ctx: &Scope<'_> = scope;
        Ok(match &step.action {
            Action::Transform(t) => Flow::Next(render(&t.output, ctx)),
            Action::Finish(f) => Flow::Finish(render(&f.result, ctx)),
            Action::Fail(f) => fail(f, ctx),
            Action::Condition(c) => self.condition(c, ctx),
            Action::Delay(d) => self.delay(step, d, ctx, record).await?,
            Action::Query(q) => self.query(q, ctx).await?,
            Action::Insert(i) => self.insert(i, ctx).await?,
            Action::Update(u) => self.update(u, ctx).await?,
            Action::Delete(d) => self.delete(d, ctx).await?,
            Action::Http(h) => self.http(h, ctx).await?,
            Action::ForEach(f) => self.for_each(f, ctx).await?,
            Action::Call(c) => self.call(c, ctx, record).await?,
            Action::Script(s) => self.script(s, ctx, record).await?,
        })
    }

    /// Runs the module in the sandbox with the context templates see; its
    /// logs go in the step's record.
    async fn script(
        &self,
        s: &Script,
        ctx: &Scope<'_>,
        record: &mut StepRecord,
    ) -> Result<Flow, StoreError> {
        let limits = s.limits();
        let scripts = &self.ports.scripts;
        let outcome = self
            .effect(async {
                let ran = scripts
                    .run(s.code.as_str().into(), ctx.seen(), limits)
                    .await;
                record.logs = ran.logs;
                match ran.result {
                    Ok(value) => Flow::Next(value),
                    Err(error) => Flow::Fail(RunError::new(error.code(), error.message(&limits))),
                }
            })
            .await?;
        Ok(outcome)
    }

    fn condition(&self, c: &Condition, ctx: &Scope<'_>) -> Flow {
        match condition::holds(&c.test, ctx, self.ports.clock.now()) {
            Ok(holds) => Flow::Next(Value::Bool(holds)),
            Err(e) => Flow::Fail(RunError::new(STEP_INVALID, e.to_string())),
        }
    }

    /// Waits what is left of the delay (after a restart, less), with a
    /// checkpoint first.
    async fn delay(
        &self,
        step: &Step,
        d: &Delay,
        ctx: &Scope<'_>,
        record: &StepRecord,
    ) -> Result<Flow, StoreError> {
        let ms = match render(&d.ms, ctx).as_u64() {
            Some(ms) if ms <= DELAY_MAX_MS => ms,
            _ => {
                return Ok(Flow::Fail(RunError::new(
                    STEP_INVALID,
                    format!("{}.ms must be 0 to {DELAY_MAX_MS} milliseconds", step.id),
                )));
            }
        };
        // A delay resumed after a restart waits only what is left.
        let since = if record.attempts.is_empty() {
            record.started_at
        } else {
            self.ports.clock.now()
        };
        self.record(StepRecord {
            started_at: since,
            ..record.clone()
        });
        if let Some(stop) = self.checkpoint().await? {
            return Ok(stop);
        }
        let elapsed = (self.ports.clock.now() - since).num_milliseconds().max(0) as u64;
        let remaining = Duration::from_millis(ms.saturating_sub(elapsed));
        self.effect(async move {
            tokio::time::sleep(remaining).await;
            Flow::Next(json!({ "waitedMs": ms }))
        })
        .await
    }

    async fn query(&self, q: &Query, ctx: &Scope<'_>) -> Result<Flow, StoreError> {
        let filter = q.filter.as_ref().map(|f| render(f, ctx));
        let sort = q.sort.as_ref().map(|s| text(&render(s, ctx)));
        let limit = q.limit.as_ref().map(|l| text(&render(l, ctx)));
        let (data, user) = (&self.ports.data, self.execution.user);
        self.effect(async {
            flow_of(
                data.query(user, &q.resource, filter.as_ref(), sort, limit)
                    .await,
            )
        })
        .await
    }

    async fn insert(&self, i: &Insert, ctx: &Scope<'_>) -> Result<Flow, StoreError> {
        let body = render(&i.data, ctx);
        let (data, user) = (&self.ports.data, self.execution.user);
        self.effect(async { flow_of(data.insert(user, &i.resource, &body).await) })
            .await
    }

    async fn update(&self, u: &Update, ctx: &Scope<'_>) -> Result<Flow, StoreError> {
        let key = text(&render(&u.key, ctx));
        let body = render(&u.data, ctx);
        let (data, user) = (&self.ports.data, self.execution.user);
        self.effect(async { flow_of(data.update(user, &u.resource, &key, &body).await) })
            .await
    }

    async fn delete(&self, d: &Delete, ctx: &Scope<'_>) -> Result<Flow, StoreError> {
        let key = text(&render(&d.key, ctx));
        let (data, user) = (&self.ports.data, self.execution.user);
        self.effect(async { flow_of(data.delete(user, &d.resource, &key).await) })
            .await
    }

    async fn http(&self, h: &Http, ctx: &Scope<'_>) -> Result<Flow, StoreError> {
        let headers = match h.headers.as_ref().map(|v| render(v, ctx)) {
            Some(Value::Object(map)) => map.into_iter().map(|(k, v)| (k, text(&v))).collect(),
            _ => Vec::new(),
        };
        let request = OutgoingRequest {
            method: h.method.clone(),
            url: text(&render(&Value::String(h.url.clone()), ctx)),
            headers,
            body: h.body.as_ref().map(|b| render(b, ctx)),
            timeout: Duration::from_millis(h.timeout_ms.unwrap_or(HTTP_TIMEOUT_DEFAULT_MS)),
            signing: h
                .signing_secret
                .clone()
                .map(|secret| (secret, self.ports.clock.now())),
            allow_private: self.execution.allow_private,
        };
        let outbound = &self.ports.outbound;
        self.effect(async { flow_of(outbound.send(request).await) })
            .await
    }
}

/// A `fail` step's error, its message rendered.
fn fail(f: &Fail, ctx: &Scope<'_>) -> Flow {
    Flow::Fail(RunError::new(
        f.code.clone(),
        match render(&f.message, ctx) {
            Value::String(s) => s,
            Value::Null => "The workflow failed".to_owned(),
            other => other.to_string(),
        },
    ))
}

pub(super) fn flow_of(answer: Result<Value, RunError>) -> Flow {
    match answer {
        Ok(value) => Flow::Next(value),
        Err(error) => Flow::Fail(error),
    }
}

/// A value as text: strings as they are, null empty, others as JSON.
pub(super) fn text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}
