//! MCP: a client session over Streamable HTTP (initialize, tools/list,
//! tools/call) as an administrator and as a user with a row-filtered grant;
//! disabled is 404; the settings need a session.

use reqwest::StatusCode;
use serde_json::{Value, json};
use testkit::{TestApp, spawn_app};

use crate::data::{create_table, member, open_to_new_role};

const PROTOCOL: &str = "2025-06-18";

/// An MCP client over Streamable HTTP with a bearer credential.
pub(crate) struct Client<'a> {
    app: &'a TestApp,
    bearer: String,
    next_id: u64,
}

impl<'a> Client<'a> {
    pub(crate) fn new(app: &'a TestApp, bearer: &str) -> Self {
        Self {
            app,
            bearer: bearer.to_owned(),
            next_id: 1,
        }
    }

    async fn post(&self, message: Value) -> reqwest::Response {
        self.app
            .client
            .post(format!("{}/api/mcp", self.app.address))
            .bearer_auth(&self.bearer)
            .header("Accept", "application/json, text/event-stream")
            .header("MCP-Protocol-Version", PROTOCOL)
            .json(&message)
            .send()
            .await
            .unwrap()
    }

    /// Sends a request; answers its JSON-RPC `result` (panics on an error).
    async fn request(&mut self, method: &str, params: Value) -> Value {
        let answer = self.exchange(method, params).await;
        assert!(answer.get("error").is_none(), "{method}: {answer}");
        answer["result"].clone()
    }

    /// Sends a request; answers the whole JSON-RPC answer.
    async fn exchange(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        let response = self
            .post(json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }))
            .await;
        assert_eq!(response.status(), StatusCode::OK, "{method}");
        let text = response.text().await.unwrap();
        // A JSON answer, or the data line of an event stream.
        let body = text
            .lines()
            .find_map(|line| line.strip_prefix("data:"))
            .unwrap_or(&text);
        let answer: Value = serde_json::from_str(body.trim()).unwrap();
        assert_eq!(answer["id"], id, "{answer}");
        answer
    }

    /// The session's opening: initialize, then the initialized notification.
    pub(crate) async fn initialize(&mut self) -> Value {
        let result = self
            .request(
                "initialize",
                json!({
                    "protocolVersion": PROTOCOL,
                    "capabilities": {},
                    "clientInfo": { "name": "tessera-tests", "version": "1.0" },
                }),
            )
            .await;
        let notified = self
            .post(json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }))
            .await;
        assert!(notified.status().is_success(), "{:?}", notified.status());
        result
    }

    /// Calls a tool; answers (is it an error, its text).
    pub(crate) async fn call(&mut self, tool: &str, arguments: Value) -> (bool, String) {
        let result = self
            .request(
                "tools/call",
                json!({ "name": tool, "arguments": arguments }),
            )
            .await;
        (
            result["isError"].as_bool().unwrap_or(false),
            result["content"][0]["text"].as_str().unwrap().to_owned(),
        )
    }
}

pub(crate) async fn enable(app: &TestApp, admin: &str) {
    let enabled = app
        .patch(
            "/admin/api/settings",
            admin,
            json!({ "data": { "mcp.enabled": true } }),
        )
        .await;
    assert_eq!(enabled.status, StatusCode::OK);
}

#[tokio::test]
async fn disabled_is_404_and_only_a_session_turns_it_on() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let mut client = Client::new(&app, &admin);
    let response = client
        .post(json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list" }))
        .await;
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    let anonymous = app.post("/api/mcp", "", json!({})).await;
    assert_eq!(anonymous.status, StatusCode::NOT_FOUND);

    let token = app.create_token(&admin, "ADMIN").await;
    let refused = app
        .patch(
            "/admin/api/settings",
            &token,
            json!({ "data": { "mcp.enabled": true } }),
        )
        .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    assert_eq!(refused.code(), "PERMISSION_DENIED");
    enable(&app, &admin).await;
    let anonymous = app.post("/api/mcp", "", json!({})).await;
    assert_eq!(anonymous.status, StatusCode::UNAUTHORIZED);
    // No sessions: nothing to stream or end.
    let stream = app
        .client
        .get(format!("{}/api/mcp", app.address))
        .bearer_auth(&admin)
        .header("Accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    let status = stream.status();
    assert_eq!(
        status,
        StatusCode::METHOD_NOT_ALLOWED,
        "{}",
        stream.text().await.unwrap()
    );
    let info = client.initialize().await;
    assert_eq!(info["serverInfo"]["name"], "tessera");
    assert!(info["capabilities"]["tools"].is_object());
    let tools = client.request("tools/list", json!({})).await;
    let mut names: Vec<&str> = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "delete_row",
            "get_row",
            "insert_row",
            "invoke_workflow",
            "list_resources",
            "query_dataview",
            "query_rows",
            "update_row"
        ]
    );
    app.patch(
        "/admin/api/settings",
        &admin,
        json!({ "data": { "mcp.enabled": false } }),
    )
    .await;
    let response = client
        .post(json!({ "jsonrpc": "2.0", "id": 9, "method": "tools/list" }))
        .await;
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn an_unknown_tool_is_a_json_rpc_error() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    enable(&app, &admin).await;
    let mut client = Client::new(&app, &admin);
    client.initialize().await;
    // Control: a known tool answers a result.
    let (error, _) = client.call("list_resources", json!({})).await;
    assert!(!error);
    let answer = client
        .exchange(
            "tools/call",
            json!({ "name": "drop_everything", "arguments": {} }),
        )
        .await;
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    assert!(answer.get("result").is_none(), "{answer}");
}

#[tokio::test]
async fn tools_run_under_the_callers_grants() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    enable(&app, &admin).await;
    let resource = create_table(
        &app,
        &admin,
        "app",
        "tasks",
        json!([
            { "name": "id", "dataType": "bigint", "primaryKey": true, "identity": "ALWAYS" },
            { "name": "owner_id", "dataType": "uuid", "nullable": false },
            { "name": "title", "dataType": "text", "nullable": false },
        ]),
    )
    .await;
    let own = json!({ "owner_id": { "eq": "$USER.id" } });
    let role = open_to_new_role(
        &app,
        &admin,
        &resource,
        "Doers",
        &["read", "create", "update"],
        own,
        Value::Null,
    )
    .await;
    let (ann_id, ann) = member(&app, &admin, "ann@example.com", &role).await;
    let (bob_id, _) = member(&app, &admin, "bob@example.com", &role).await;

    // The administrator sees and writes everything.
    let mut root = Client::new(&app, &admin);
    root.initialize().await;
    for (owner, title) in [(&ann_id, "ann's task"), (&bob_id, "bob's task")] {
        let (error, text) = root
            .call(
                "insert_row",
                json!({ "resource": "app.tasks", "data": { "owner_id": owner, "title": title } }),
            )
            .await;
        assert!(!error, "{text}");
    }
    let (_, text) = root
        .call(
            "query_rows",
            json!({ "resource": "app.tasks", "sort": "id" }),
        )
        .await;
    let page: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(page["rows"].as_array().unwrap().len(), 2);

    // Ann: her schemas name the table; she reads and writes only her rows.
    let mut client = Client::new(&app, &ann);
    client.initialize().await;
    let tools = client.request("tools/list", json!({})).await;
    let query_rows = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "query_rows")
        .unwrap();
    assert_eq!(
        query_rows["inputSchema"]["properties"]["resource"]["enum"],
        json!(["app.tasks"])
    );
    let delete_row = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "delete_row")
        .unwrap();
    assert!(
        delete_row["inputSchema"]["properties"]["resource"]
            .get("enum")
            .is_none()
    );

    let (error, text) = client.call("list_resources", json!({})).await;
    assert!(!error);
    let listed: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(listed["tables"][0]["resource"], "app.tasks");
    assert_eq!(
        listed["tables"][0]["methods"],
        json!(["GET", "POST", "PATCH"])
    );

    let (error, text) = client
        .call(
            "query_rows",
            json!({ "resource": "app.tasks", "filter": { "title": { "like": "%task" } } }),
        )
        .await;
    assert!(!error, "{text}");
    let page: Value = serde_json::from_str(&text).unwrap();
    let titles: Vec<&str> = page["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["title"].as_str().unwrap())
        .collect();
    assert_eq!(titles, ["ann's task"]);
    let bobs_id = app
        .db
        .sql("SELECT id::text FROM app.tasks WHERE title = 'bob''s task'")
        .await
        .unwrap();
    let (error, text) = client
        .call("get_row", json!({ "resource": "app.tasks", "id": bobs_id }))
        .await;
    assert!(error && text.starts_with("NOT_FOUND"), "{text}");

    // A write outside her grant is a tool error, and nothing is written.
    let (error, text) = client
        .call(
            "insert_row",
            json!({ "resource": "app.tasks", "data": { "owner_id": bob_id, "title": "forged" } }),
        )
        .await;
    assert!(error, "{text}");
    assert!(text.starts_with("PERMISSION_DENIED"), "{text}");
    let (error, text) = client
        .call(
            "delete_row",
            json!({ "resource": "app.tasks", "id": bobs_id }),
        )
        .await;
    assert!(error && text.starts_with("PERMISSION_DENIED"), "{text}");
    let (error, text) = client
        .call(
            "update_row",
            json!({ "resource": "app.tasks", "id": bobs_id, "data": { "title": "mine now" } }),
        )
        .await;
    assert!(error && text.starts_with("NOT_FOUND"), "{text}");
    assert_eq!(
        app.db
            .sql("SELECT string_agg(title, ',' ORDER BY id) FROM app.tasks")
            .await
            .unwrap(),
        "ann's task,bob's task"
    );
    let (error, text) = client
        .call("query_rows", json!({ "resource": "svc.users" }))
        .await;
    assert!(error && text.starts_with("NOT_FOUND"), "{text}");
    let (error, text) = client
        .call(
            "query_rows",
            json!({ "resource": "app.tasks", "filter": { "nope": { "eq": 1 } } }),
        )
        .await;
    assert!(error && text.starts_with("INVALID_QUERY"), "{text}");
    let (error, text) = client
        .call("query_dataview", json!({ "slug": "missing" }))
        .await;
    assert!(error && text.starts_with("NOT_FOUND"), "{text}");
    let (error, text) = client
        .call("invoke_workflow", json!({ "slug": "missing" }))
        .await;
    assert!(error && text.starts_with("WORKFLOW_NOT_FOUND"), "{text}");
}
