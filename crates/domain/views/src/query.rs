//! A DataView read as the store runs it: the source's rows under the
//! caller's grants, grouped into the view's output, then the request's
//! filter, sort and page over that output. One SQL statement.

use data::{Column, ListParams, Output, Predicate, Table};
use kernel::filter::Filter;
use kernel::page::{LIMIT_DEFAULT, LIMIT_MAX};
use permissions::Access;

use crate::definition::{Agg, Bucket, Definition, Measure};

/// How one output column is computed from the source's rows.
#[derive(Debug, Clone, PartialEq)]
pub enum Computed<'a> {
    /// A source column as the caller sees it, grouped by.
    Group(Output<'a>),
    /// A time bucket of a source column, grouped by.
    Bucket(Bucket, Output<'a>),
    /// `count(*)`, or the non-null values of a column.
    Count(Option<Output<'a>>),
    /// Another aggregate of a column.
    Agg(Agg, Output<'a>),
}

/// A read of a DataView.
#[derive(Debug, Clone, PartialEq)]
pub struct ViewQuery<'a> {
    /// The source table.
    pub source: &'a Table,
    /// The output, as a table: names and types of the answer's columns.
    pub shape: &'a Table,
    /// How each output column is computed, in the shape's order.
    pub values: Vec<Computed<'a>>,
    /// Source rows: the view's filter AND the caller's read-grant filters.
    pub rows: Predicate<'a>,
    /// Source columns hidden on some rows, with their masks (the view's
    /// filter reads them through these, as a caller's own filter does).
    pub masks: Vec<Output<'a>>,
    /// Output rows the caller's view grants reach.
    pub granted: Predicate<'a>,
    /// The view's own order, before its limit.
    pub view_sort: Vec<(&'a Column, bool)>,
    /// Rows the view yields at most.
    pub view_limit: Option<u32>,
    /// The request's filter over the output.
    pub filter: Predicate<'a>,
    /// The request's order (the view's by default), groups appended.
    pub sort: Vec<(&'a Column, bool)>,
    /// Page size.
    pub limit: u32,
    /// Rows skipped.
    pub offset: u64,
    /// Adds the total.
    pub count: bool,
}

/// The request's parameters, checked against the view's output.
pub(crate) struct Request {
    pub(crate) filter: Option<Filter>,
    pub(crate) sort: Option<String>,
    pub(crate) limit: u32,
    pub(crate) offset: u64,
    pub(crate) count: bool,
}

impl Request {
    /// Checks `params` against the output `shape`; the page size defaults
    /// to the view's limit (up to the largest page).
    pub(crate) fn check(
        params: &ListParams,
        shape: &Table,
        definition: &Definition,
    ) -> Result<Self, data::DataError> {
        let default = definition
            .limit
            .map_or(LIMIT_DEFAULT, |limit| limit.min(LIMIT_MAX));
        Ok(Self {
            filter: params
                .filter
                .as_deref()
                .map(|raw| data::parse_filter(shape, &Access::All, raw))
                .transpose()?,
            sort: params.sort.clone(),
            limit: data::number(
                params.limit.as_deref(),
                "limit",
                default,
                1,
                u64::from(LIMIT_MAX),
            )?,
            offset: data::number(params.offset.as_deref(), "offset", 0, 0, i64::MAX as u64)?,
            count: match params.count.as_deref() {
                None => false,
                Some("exact") => true,
                Some(_) => return Err(data::query_error("count", "must be exact")),
            },
        })
    }
}

/// The read of `definition` (already shaped as `shape` on `source`) by a
/// caller with `access` to the source's rows and `granted` to the view.
pub(crate) fn compile<'a>(
    definition: &'a Definition,
    source: &'a Table,
    shape: &'a Table,
    access: &Access<'a>,
    granted: &Access<'a>,
    request: &'a Request,
) -> Result<ViewQuery<'a>, data::DataError> {
    let seen = |name: &str| -> Option<Output<'a>> {
        source.column(name).map(|column| Output {
            column,
            mask: access.column_filters(name),
        })
    };
    let missing = || data::DataError::NotFound;
    let values = definition
        .columns
        .iter()
        .map(|c| {
            Ok(match &c.measure {
                Measure::Plain(name) => Computed::Group(seen(name).ok_or_else(missing)?),
                Measure::Bucket(b, name) => Computed::Bucket(*b, seen(name).ok_or_else(missing)?),
                Measure::Agg(Agg::Count, name) => Computed::Count(
                    name.as_deref()
                        .map(|n| seen(n).ok_or_else(missing))
                        .transpose()?,
                ),
                Measure::Agg(agg, name) => {
                    Computed::Agg(*agg, name.as_deref().and_then(seen).ok_or_else(missing)?)
                }
            })
        })
        .collect::<Result<Vec<_>, data::DataError>>()?;
    let by_name = |name: &str| shape.column(name);
    let view_sort: Vec<(&Column, bool)> = definition
        .sort
        .iter()
        .filter_map(|(name, descending)| by_name(name).map(|c| (c, *descending)))
        .collect();
    let sort = match request.sort.as_deref() {
        Some(raw) => data::sort(shape, &Access::All, Some(raw))?,
        None => {
            let mut keys = view_sort.clone();
            for column in shape.key_columns() {
                if !keys.iter().any(|(c, _)| c.name == column.name) {
                    keys.push((column, false));
                }
            }
            keys
        }
    };
    Ok(ViewQuery {
        source,
        shape,
        values,
        rows: Predicate::All(
            [
                definition.filter.as_ref().map(Predicate::Own),
                Predicate::any_of(access.row_filters()),
            ]
            .into_iter()
            .flatten()
            .collect(),
        ),
        masks: data::masks(source, access),
        granted: Predicate::any_of(granted.row_filters()).unwrap_or(Predicate::All(Vec::new())),
        view_sort,
        view_limit: definition.limit,
        filter: request
            .filter
            .as_ref()
            .map_or(Predicate::All(Vec::new()), Predicate::Own),
        sort,
        limit: request.limit,
        offset: request.offset,
        count: request.count,
    })
}
