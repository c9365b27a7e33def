use crate::query::Stored;
use async_trait::async_trait;
use audit::{Actor, ActorType, AuditEntry, AuditEvent, AuditQuery, AuditStore, Before};
use kernel::StoreError;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QueryOrder, QuerySelect};

use crate::entity::audit_log;
use crate::{PgStore, write_audit};

#[async_trait]
impl AuditStore for PgStore {
    async fn audit(&self, query: &AuditQuery) -> Result<Vec<AuditEntry>, StoreError> {
        let mut select = audit_log::Entity::find();
        if let Some(action) = &query.action {
            select = select.filter(audit_log::Column::Action.eq(action.as_str()));
        }
        if let Some(actor) = query.actor_id {
            select = select.filter(audit_log::Column::ActorId.eq(actor));
        }
        select = match query.before {
            Some(Before::Id(id)) => select.filter(audit_log::Column::Id.lt(id)),
            Some(Before::Time(at)) => select.filter(audit_log::Column::At.lt(at)),
            None => select,
        };
        let rows = select
            .order_by_desc(audit_log::Column::Id)
            .limit(query.limit)
            .all(&self.db)
            .stored()
            .await?;
        Ok(rows
            .into_iter()
            .map(|row| AuditEntry {
                id: row.id,
                at: row.at,
                actor: Actor {
                    kind: ActorType::parse(&row.actor_type).unwrap_or(ActorType::System),
                    id: row.actor_id,
                },
                action: row.action,
                target: row.target,
                details: row.details.unwrap_or(serde_json::Value::Null),
                ip: row.ip,
            })
            .collect())
    }

    async fn record(&self, event: AuditEvent) -> Result<(), StoreError> {
        write_audit(&self.db, event, self.now()).await
    }
}
