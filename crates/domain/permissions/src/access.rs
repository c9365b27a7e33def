//! Grant evaluation for the Data API: which of a caller's grants cover an
//! action on a resource, and the rows and columns they reach.

use kernel::filter::Filter;
use serde_json::Value;
use uuid::Uuid;

use crate::{Action, Denied, Principal};

/// A resource grant in the shape the Data API evaluates: its filter parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct Scope {
    /// The role holding the grant.
    pub role_id: Uuid,
    /// The action it allows.
    pub action: Action,
    /// Rows it covers; `None`: all.
    pub filter: Option<Filter>,
    /// Columns it covers; `None`: all.
    pub columns: Option<Vec<String>>,
}

impl Scope {
    /// The evaluable form of a stored resource grant; `None` when its stored
    /// filter no longer parses (such a grant covers nothing).
    pub fn new(
        role_id: Uuid,
        action: Action,
        filter: Option<&Value>,
        columns: Option<Vec<String>>,
    ) -> Option<Self> {
        let filter = match filter {
            None | Some(Value::Null) => None,
            Some(value) => Some(Filter::parse(value, "filter").ok()?),
        };
        Some(Self {
            role_id,
            action,
            filter,
            columns,
        })
    }

    /// Whether the grant covers `column`.
    pub fn covers(&self, column: &str) -> bool {
        self.columns
            .as_ref()
            .is_none_or(|list| list.iter().any(|c| c == column))
    }
}

/// What the caller may do: everything (administrators) or what some grants cover.
#[derive(Debug, Clone, PartialEq)]
pub enum Access<'a> {
    /// An administrator: grants are not consulted.
    All,
    /// The caller's grants of the action (never empty); they combine with OR.
    Granted(Vec<&'a Scope>),
}

impl<'a> Access<'a> {
    /// The caller's access for `action` among a resource's `scopes`.
    pub fn evaluate(
        caller: &Principal,
        scopes: &'a [Scope],
        action: Action,
    ) -> Result<Self, Denied> {
        if caller.admin {
            return Ok(Access::All);
        }
        let granted: Vec<&Scope> = scopes
            .iter()
            .filter(|s| s.action == action && caller.role_ids.contains(&s.role_id))
            .collect();
        if granted.is_empty() {
            Err(Denied::NoGrant)
        } else {
            Ok(Access::Granted(granted))
        }
    }

    /// Whether some grant covers `column`.
    pub fn covers(&self, column: &str) -> bool {
        match self {
            Access::All => true,
            Access::Granted(scopes) => scopes.iter().any(|s| s.covers(column)),
        }
    }

    /// Narrows to the grants that cover every one of `columns`; `None` when none does.
    pub fn covering<'c>(&self, columns: impl Iterator<Item = &'c str> + Clone) -> Option<Self> {
        match self {
            Access::All => Some(Access::All),
            Access::Granted(scopes) => {
                let kept: Vec<&Scope> = scopes
                    .iter()
                    .copied()
                    .filter(|s| columns.clone().all(|c| s.covers(c)))
                    .collect();
                (!kept.is_empty()).then_some(Access::Granted(kept))
            }
        }
    }

    /// The row filters to OR together; `None` when some grant covers every row.
    pub fn row_filters(&self) -> Option<Vec<&'a Filter>> {
        match self {
            Access::All => None,
            Access::Granted(scopes) => scopes.iter().map(|s| s.filter.as_ref()).collect(),
        }
    }

    /// For a column: `None` when every row the grants reach shows it, else the
    /// filters of the grants that cover it (an empty list: no row shows it).
    pub fn column_filters(&self, column: &str) -> Option<Vec<&'a Filter>> {
        match self {
            Access::All => None,
            Access::Granted(scopes) => {
                let covering = scopes.iter().filter(|s| s.covers(column));
                // Shown on every row reached when every grant covers it, or when a
                // covering grant has no filter (it reaches every row).
                if scopes.iter().all(|s| s.covers(column))
                    || covering.clone().any(|s| s.filter.is_none())
                {
                    return None;
                }
                Some(covering.filter_map(|s| s.filter.as_ref()).collect())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::Credential;

    fn scope(
        role: u128,
        action: Action,
        filter: Option<serde_json::Value>,
        columns: Option<&[&str]>,
    ) -> Scope {
        Scope {
            role_id: Uuid::from_u128(role),
            action,
            filter: filter.map(|f| Filter::parse(&f, "filter").unwrap()),
            columns: columns.map(|c| c.iter().map(|s| s.to_string()).collect()),
        }
    }

    fn caller(roles: &[u128], admin: bool) -> Principal {
        Principal {
            user_id: Uuid::nil(),
            credential: Credential::Session { id: Uuid::nil() },
            role_ids: roles.iter().map(|r| Uuid::from_u128(*r)).collect(),
            api_access: true,
            admin,
            timezone: None,
        }
    }

    #[test]
    fn grants_combine_with_or() {
        let scopes = [
            scope(
                1,
                Action::Read,
                Some(json!({ "owner": { "eq": "$USER.id" } })),
                Some(&["id", "title"]),
            ),
            scope(2, Action::Read, None, Some(&["id"])),
            scope(1, Action::Create, None, None),
            scope(3, Action::Read, None, None),
        ];
        assert_eq!(
            Access::evaluate(&caller(&[9], false), &scopes, Action::Read),
            Err(Denied::NoGrant)
        );
        assert_eq!(
            Access::evaluate(&caller(&[9], true), &scopes, Action::Delete),
            Ok(Access::All)
        );
        let access = Access::evaluate(&caller(&[1, 2], false), &scopes, Action::Read).unwrap();
        assert!(access.covers("title"));
        assert!(!access.covers("secret"));
        // Role 2 covers every row, so no row filter applies.
        assert_eq!(access.row_filters(), None);
        assert_eq!(access.column_filters("id"), None);
        assert_eq!(access.column_filters("title").map(|f| f.len()), Some(1));
        let narrowed = access.covering(["title"].into_iter()).unwrap();
        assert_eq!(narrowed.row_filters().map(|f| f.len()), Some(1));
        assert!(access.covering(["secret"].into_iter()).is_none());
    }
}
