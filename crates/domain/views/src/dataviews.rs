//! DataViews for the Admin API: drafts checked against their source when
//! saved, published snapshots, and an administrator's preview of a draft.

use std::sync::Arc;

use data::{Caller, DataError, DataRequest, Effect, ListParams, RoleSubject, Table};
use kernel::validate::TimeZoneName;
use kernel::{FieldError, StoreError, new_id};
use permissions::{Action, Plane, Principal, Scope};
use serde_json::{Map, Value, json};
use uuid::Uuid;

use crate::definition::Definition;
use crate::error::ViewError;
use crate::service::{ViewService, found, patched, slug_and_name};
use crate::store::DataViewRecord;

/// A draft run by an administrator.
#[derive(Debug, Clone, PartialEq)]
pub struct Preview {
    /// The statement that ran.
    pub sql: String,
    /// The values bound to it.
    pub params: Vec<Value>,
    /// The rows, as a JSON array's text.
    pub rows: String,
}

/// Who a definition's preview reads as.
#[derive(Debug, Clone, Default)]
pub struct PreviewAs {
    /// A member of this role alone (its read grants on the source apply,
    /// row filters and column limits included); none: the administrator
    /// asking.
    pub role: Option<RoleSubject>,
    /// The user `$USER` stands for (none: nobody).
    pub user: Option<Uuid>,
    /// The zone buckets and `$PERIOD` are cut in (none: the reader's).
    pub zone: Option<TimeZoneName>,
}

impl ViewService {
    /// Every DataView.
    pub async fn list(&self) -> Result<Vec<DataViewRecord>, ViewError> {
        Ok(self.store.dataviews().await?)
    }

    /// One DataView.
    pub async fn get(&self, id: Uuid) -> Result<DataViewRecord, ViewError> {
        self.store
            .dataview(id)
            .await?
            .ok_or(ViewError::Store(StoreError::NotFound))
    }

    /// Creates a draft from `body` (`slug`, `name` and the definition),
    /// checked against its source.
    pub async fn create(
        &self,
        caller: &Principal,
        body: &Map<String, Value>,
        ip: Option<String>,
    ) -> Result<DataViewRecord, ViewError> {
        let now = self.clock.now();
        let record = self
            .checked_view(new_id(), body, now, now, None, None)
            .await?;
        let event = self.event(caller, "dataview.create", record.id, ip);
        Ok(self.store.save_dataview(&record, false, event).await?)
    }

    /// Changes the fields of `patch` (the others keep their value); what is
    /// served changes only at the next publish.
    pub async fn update(
        &self,
        caller: &Principal,
        id: Uuid,
        patch: &Map<String, Value>,
        ip: Option<String>,
    ) -> Result<DataViewRecord, ViewError> {
        let current = self.get(id).await?;
        let mut fields = current.draft.as_object().cloned().unwrap_or_default();
        fields.insert("slug".into(), json!(current.slug));
        fields.insert("name".into(), json!(current.name));
        let body = patched(fields, patch);
        let record = self
            .checked_view(
                id,
                &body,
                current.created_at,
                self.clock.now(),
                current.published,
                current.published_at,
            )
            .await?;
        let event = self.event(caller, "dataview.update", id, ip);
        Ok(self.store.save_dataview(&record, true, event).await?)
    }

    /// Deletes a DataView with its grants.
    pub async fn delete(
        &self,
        caller: &Principal,
        id: Uuid,
        ip: Option<String>,
    ) -> Result<(), ViewError> {
        let event = self.event(caller, "dataview.delete", id, ip);
        found(self.store.delete_dataview(id, event).await?)
    }

    /// Publishes the draft, checked again against its source as it is now.
    pub async fn publish(
        &self,
        caller: &Principal,
        id: Uuid,
        ip: Option<String>,
    ) -> Result<DataViewRecord, ViewError> {
        let current = self.get(id).await?;
        let definition = Definition::parse(current.draft.as_object().unwrap_or(&Map::new()))?;
        self.source_shape(&definition).await?;
        let event = self.event(caller, "dataview.publish", id, ip);
        self.store
            .publish_dataview(id, self.clock.now(), event)
            .await?
            .ok_or(ViewError::Store(StoreError::NotFound))
    }

    /// Runs the draft as the administrator the bearer stands for: the SQL
    /// that ran, with its values and rows.
    pub async fn preview(&self, request: DataRequest<'_>, id: Uuid) -> Result<Preview, ViewError> {
        let current = self.get(id).await?;
        let definition = Definition::parse(current.draft.as_object().unwrap_or(&Map::new()))?;
        self.run_preview(request, &definition, &PreviewAs::default())
            .await
    }

    /// Runs `body`, a definition saved or not, as `who` says: what the
    /// console's builder shows while it is edited.
    pub async fn preview_definition(
        &self,
        request: DataRequest<'_>,
        body: &Map<String, Value>,
        who: &PreviewAs,
    ) -> Result<Preview, ViewError> {
        let definition = Definition::parse(body)?;
        self.run_preview(request, &definition, who).await
    }

    async fn run_preview(
        &self,
        request: DataRequest<'_>,
        definition: &Definition,
        who: &PreviewAs,
    ) -> Result<Preview, ViewError> {
        let params = ListParams::default();
        let answer = self
            .data
            .as_caller(
                request,
                Plane::Admin,
                Effect::Reads,
                async |admin, version| {
                    let (source, shape) =
                        self.source_shape(definition).await.map_err(|e| match e {
                            ViewError::Data(e) => e,
                            ViewError::Store(e) => DataError::Store(e),
                            ViewError::Invalid(e) => DataError::Payload(e),
                        })?;
                    let zone = who.zone.as_ref().map(|z| z.as_str().to_owned());
                    let Some(role) = who.role else {
                        let principal = Principal {
                            timezone: zone.or_else(|| admin.principal.timezone.clone()),
                            ..admin.principal.clone()
                        };
                        let caller = Caller {
                            principal: &principal,
                            ..admin
                        };
                        return self
                            .run(caller, version, definition, &source, &shape, &[], &params)
                            .await;
                    };
                    let member = role.member(who.user, admin.principal, zone)?;
                    // The view itself as a grant without a filter gives it.
                    let view = [Scope {
                        role_id: role.id,
                        action: Action::Read,
                        filter: None,
                        columns: None,
                    }];
                    let caller = Caller {
                        principal: &member,
                        ..admin
                    };
                    self.run(caller, version, definition, &source, &shape, &view, &params)
                        .await
                },
            )
            .await?;
        Ok(Preview {
            sql: answer.sql,
            params: answer.params,
            rows: answer.found.json.unwrap_or_else(|| "[]".to_owned()),
        })
    }

    /// The source table of `definition` and the output it gives there.
    pub(crate) async fn source_shape(
        &self,
        definition: &Definition,
    ) -> Result<(Arc<Table>, Table), ViewError> {
        let source = self
            .store
            .table(&definition.schema, &definition.table)
            .await?
            .ok_or_else(|| {
                FieldError::new(
                    "source",
                    format!(
                        "{}.{} is not a registered table",
                        definition.schema, definition.table
                    ),
                )
            })?;
        let shape = definition.shape(&source)?;
        Ok((source, shape))
    }

    /// A DataView record from `body`, its definition checked against its source.
    async fn checked_view(
        &self,
        id: Uuid,
        body: &Map<String, Value>,
        created_at: chrono::DateTime<chrono::Utc>,
        updated_at: chrono::DateTime<chrono::Utc>,
        published: Option<Value>,
        published_at: Option<chrono::DateTime<chrono::Utc>>,
    ) -> Result<DataViewRecord, ViewError> {
        let (slug, name) = slug_and_name(body)?;
        let definition = Definition::parse(body)?;
        self.source_shape(&definition).await?;
        Ok(DataViewRecord {
            id,
            slug,
            name,
            draft: definition.to_json(),
            published,
            published_at,
            created_at,
            updated_at,
        })
    }
}
