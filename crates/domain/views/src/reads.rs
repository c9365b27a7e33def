//! The one reader of DataViews: a view's definition compiled under the
//! caller's grants on the view and on its source, run in one statement.

use std::sync::Arc;

use data::{Caller, DataError, DataRequest, Effect, ListParams, Page, Table};
use permissions::{Access, Action, Plane};

use crate::definition::Definition;
use crate::error::ViewError;
use crate::query::{Request, compile};
use crate::service::ViewService;
use crate::store::{PublishedView, ViewAnswer, ViewKey};

impl ViewService {
    /// `GET /api/views/{slug}`: a page of the published view's output.
    pub async fn read(
        &self,
        request: DataRequest<'_>,
        slug: &str,
        params: &ListParams,
    ) -> Result<Page, ViewError> {
        Ok(self
            .data
            .as_caller(
                request,
                Plane::Api,
                Effect::Reads,
                async |caller, version| {
                    self.read_as(caller, version, ViewKey::Slug(slug), params)
                        .await
                },
            )
            .await?)
    }

    /// Every published view that serves (for the per-role OpenAPI document).
    pub async fn published(&self) -> Result<Vec<Arc<PublishedView>>, ViewError> {
        Ok(self.store.published_views().await?)
    }

    /// Reads a published view as `caller`, resolved at auth version `version`.
    pub(crate) async fn read_as(
        &self,
        caller: Caller<'_>,
        version: i64,
        key: ViewKey<'_>,
        params: &ListParams,
    ) -> Result<Page, DataError> {
        let view = self
            .store
            .published_view(key)
            .await
            .map_err(DataError::Store)?
            .ok_or(DataError::NotFound)?;
        let answer = self
            .run(
                caller,
                version,
                &view.definition,
                &view.source,
                &view.shape,
                &view.scopes,
                params,
            )
            .await?;
        Ok(Page {
            rows: answer.found.json.unwrap_or_else(|| "[]".to_owned()),
            limit: answer.limit,
            offset: answer.offset,
            total: answer.found.total,
        })
    }

    /// Runs `definition` as `caller`: grants of the view (`view_scopes`)
    /// and of the source apply.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn run(
        &self,
        caller: Caller<'_>,
        version: i64,
        definition: &Definition,
        source: &Table,
        shape: &Table,
        view_scopes: &[permissions::Scope],
        params: &ListParams,
    ) -> Result<Ran, DataError> {
        let granted = Access::evaluate(caller.principal, view_scopes, Action::Read)?;
        let access = Access::evaluate(caller.principal, &source.scopes, Action::Read)?;
        let request = Request::check(params, shape, definition)?;
        let query = compile(definition, source, shape, &access, &granted, &request)?;
        let context = self
            .data
            .context_at(caller, version, source.version)
            .await?;
        let ViewAnswer { sql, params, found } = self
            .store
            .run_view(&query, &context)
            .await
            .map_err(data::read_error)?;
        Ok(Ran {
            sql,
            params,
            found,
            limit: request.limit,
            offset: request.offset,
        })
    }
}

/// A view read's statement and answer, with the page it asked for.
pub(crate) struct Ran {
    pub(crate) sql: String,
    pub(crate) params: Vec<serde_json::Value>,
    pub(crate) found: data::Found,
    limit: u32,
    offset: u64,
}
