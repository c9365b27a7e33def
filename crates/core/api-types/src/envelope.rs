//! The envelopes every answer comes in, and the error object.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

/// Deserializes a field that may be absent (outer `None`), null (`Some(None)`) or set.
pub fn double_option<'de, T, D>(deserializer: D) -> Result<Option<Option<T>>, D::Error>
where
    T: Deserialize<'de>,
    D: Deserializer<'de>,
{
    Option::<T>::deserialize(deserializer).map(Some)
}

/// A successful answer: `{ "data": ... }`.
#[derive(Debug, Serialize, ToSchema)]
pub struct DataEnvelope<T> {
    /// The payload.
    pub data: T,
}

/// A request body: `{ "data": ... }`.
#[derive(Debug, Deserialize)]
pub struct DataBody<T> {
    /// The payload.
    pub data: T,
}

/// A list with paging facts: `{ "data": [...], "meta": { "total": n } }`.
#[derive(Debug, Serialize, ToSchema)]
pub struct PagedEnvelope<T> {
    /// The items of the page.
    pub data: Vec<T>,
    /// Paging facts.
    pub meta: PageMeta,
}

/// Paging facts of a list.
#[derive(Debug, Serialize, ToSchema)]
pub struct PageMeta {
    /// Items matching, over all pages.
    pub total: u64,
}

/// Paging facts of a page of Data API rows.
#[derive(Debug, Serialize, ToSchema)]
pub struct RowsMeta {
    /// The page size.
    pub limit: u32,
    /// Rows skipped.
    pub offset: u64,
    /// Rows matching, over all pages (with `count=exact`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total: Option<i64>,
}

/// One error of a failed request.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ErrorObject {
    /// UPPER_SNAKE error code.
    pub code: String,
    /// Human-readable explanation.
    pub message: String,
    /// JSON path of the offending field, relative to the payload.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// The 1-based character of the input the error points at (SQL console).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub position: Option<usize>,
    /// The challenge of an MFA_REQUIRED refusal, for `POST /api/auth/mfa/verify`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub challenge: Option<String>,
}

/// A failed request: `{ "errors": [...] }`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ErrorEnvelope {
    /// What went wrong.
    pub errors: Vec<ErrorObject>,
    /// Extra facts, such as the run id of a timed-out webhook.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub meta: Option<Value>,
}
