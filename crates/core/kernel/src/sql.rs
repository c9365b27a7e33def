//! SQL text helpers shared by the crates that write SQL.

/// `name` as a quoted SQL identifier: `"name"`, inner quotes doubled. Names
/// come from the catalog or were validated; quoting keeps them names.
pub fn quote_ident(name: &str) -> String {
    let mut quoted = String::with_capacity(name.len() + 2);
    quoted.push('"');
    for c in name.chars() {
        if c == '"' {
            quoted.push('"');
        }
        quoted.push(c);
    }
    quoted.push('"');
    quoted
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_and_doubles_inner_quotes() {
        assert_eq!(quote_ident("notes"), "\"notes\"");
        assert_eq!(quote_ident("a\"b"), "\"a\"\"b\"");
    }
}
