//! A host that serves no HTTP: a reporting job that calls Tessera's domain
//! services directly, as a token's owner, under exactly the grants and row
//! filters the Data API applies. It links `tessera-services` alone, so no
//! web framework comes with it (`cargo xtask lint` checks that).
//! docs/embedding.md walks through it.

use serde_json::Value;
use services::Services;
use services::data::{DataRequest, ListParams};

/// The rows of `schema.table` that the owner of `token` may read, newest
/// `id` first, at most `limit` of them.
pub async fn report(
    services: &Services,
    token: &str,
    (schema, table): (&str, &str),
    limit: u32,
) -> anyhow::Result<Vec<Value>> {
    let as_owner = DataRequest {
        bearer: token,
        zone_header: None,
        ip: None,
    };
    let params = ListParams {
        sort: Some("-id".into()),
        limit: Some(limit.to_string()),
        ..ListParams::default()
    };
    let page = services.data.list(as_owner, schema, table, &params).await?;
    Ok(serde_json::from_str(&page.rows)?)
}
