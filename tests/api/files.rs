//! Files: uploads streamed with their limit, downloads (PUBLIC without a
//! credential, PRIVATE under grants with row filters), ranges, deletion, and
//! the S3 path against a local emulator shared by two server processes.

use reqwest::StatusCode;
use reqwest::header::{self, HeaderMap};
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};
use testkit::{Answer, TestApp, spawn_app, spawn_app_with};

use crate::data::{create_role, grant, member};

/// The resource id of `svc.files` (seeded by its migration).
const FILES_RESOURCE: &str = "00000000-0000-7000-8000-000000000105";
const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01";

/// Uploads `bytes` as `name` of `content_type` to `base`.
async fn upload_to(
    app: &TestApp,
    base: &str,
    bearer: &str,
    name: &str,
    content_type: &str,
    bytes: Vec<u8>,
    visibility: Option<&str>,
) -> Answer {
    let part = reqwest::multipart::Part::bytes(bytes)
        .file_name(name.to_owned())
        .mime_str(content_type)
        .unwrap();
    let mut form = reqwest::multipart::Form::new();
    if let Some(visibility) = visibility {
        form = form.text("visibility", visibility.to_owned());
    }
    let response = app
        .client
        .post(format!("{base}/api/files"))
        .bearer_auth(bearer)
        .multipart(form.part("file", part))
        .send()
        .await
        .unwrap();
    TestApp::answer(response).await
}

async fn upload(
    app: &TestApp,
    bearer: &str,
    name: &str,
    bytes: Vec<u8>,
    visibility: Option<&str>,
) -> Answer {
    upload_to(
        app,
        &app.address,
        bearer,
        name,
        "text/plain",
        bytes,
        visibility,
    )
    .await
}

/// Downloads from `base`: status, headers and bytes.
async fn download_from(
    app: &TestApp,
    base: &str,
    id: &str,
    bearer: Option<&str>,
    range: Option<&str>,
) -> (StatusCode, HeaderMap, Vec<u8>) {
    let mut request = app.client.get(format!("{base}/api/files/{id}"));
    if let Some(bearer) = bearer {
        request = request.bearer_auth(bearer);
    }
    if let Some(range) = range {
        request = request.header(header::RANGE, range);
    }
    let response = request.send().await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    (status, headers, response.bytes().await.unwrap().to_vec())
}

async fn download(
    app: &TestApp,
    id: &str,
    bearer: Option<&str>,
    range: Option<&str>,
) -> (StatusCode, HeaderMap, Vec<u8>) {
    download_from(app, &app.address, id, bearer, range).await
}

fn hex_sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

async fn stored_files(app: &TestApp) -> i64 {
    app.db
        .sql("SELECT count(*)::text FROM svc.files")
        .await
        .unwrap()
        .parse()
        .unwrap()
}

/// Objects in the app's local file folder.
fn objects(app: &TestApp) -> usize {
    let files::BlobsConfig::Local(dir) = &app.config.files else {
        panic!("not a local folder");
    };
    std::fs::read_dir(dir).map_or(0, |entries| {
        entries
            .filter_map(Result::ok)
            .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
            .count()
    })
}

#[tokio::test]
async fn an_upload_is_hashed_counted_and_read_back_whole_or_by_range() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let bytes = b"hello, files! 0123456789".to_vec();
    let created = upload(&app, &admin, "../notes/hello.txt", bytes.clone(), None).await;
    assert_eq!(created.status, StatusCode::CREATED, "{created:?}");
    let record = created.data();
    let id = record["id"].as_str().unwrap();
    assert_eq!(record["name"], "hello.txt");
    assert_eq!(record["contentType"], "text/plain");
    assert_eq!(record["size"], bytes.len());
    assert_eq!(record["sha256"], hex_sha256(&bytes));
    assert_eq!(record["visibility"], "PRIVATE");
    assert!(record["createdAt"].is_string());
    assert!(record["ownerId"].is_string());

    let (status, headers, body) = download(&app, id, Some(&admin), None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body, bytes);
    assert_eq!(headers[header::CONTENT_TYPE], "text/plain");
    assert_eq!(headers[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
    assert_eq!(headers[header::ETAG], format!("\"{}\"", hex_sha256(&bytes)));
    assert_eq!(headers[header::CACHE_CONTROL], "private, no-cache");
    assert!(
        headers[header::CONTENT_DISPOSITION]
            .to_str()
            .unwrap()
            .starts_with("inline; filename=\"hello.txt\"")
    );

    let unchanged = app
        .client
        .get(format!("{}/api/files/{id}", app.address))
        .bearer_auth(&admin)
        .header(header::IF_NONE_MATCH, format!("\"{}\"", hex_sha256(&bytes)))
        .send()
        .await
        .unwrap();
    assert_eq!(unchanged.status(), StatusCode::NOT_MODIFIED);

    let (status, headers, body) = download(&app, id, Some(&admin), Some("bytes=7-11")).await;
    assert_eq!(status, StatusCode::PARTIAL_CONTENT);
    assert_eq!(body, b"files");
    assert_eq!(
        headers[header::CONTENT_RANGE],
        format!("bytes 7-11/{}", bytes.len())
    );
    let (status, _, body) = download(&app, id, Some(&admin), Some("bytes=-4")).await;
    assert_eq!(
        (status, body),
        (StatusCode::PARTIAL_CONTENT, b"6789".to_vec())
    );
    let (status, headers, _) = download(&app, id, Some(&admin), Some("bytes=500-")).await;
    assert_eq!(status, StatusCode::RANGE_NOT_SATISFIABLE);
    assert_eq!(
        headers[header::CONTENT_RANGE],
        format!("bytes */{}", bytes.len())
    );

    let meta = app.get(&format!("/api/files/{id}/meta"), &admin).await;
    assert_eq!(meta.data(), record);

    let removed = app.delete(&format!("/api/files/{id}"), &admin).await;
    assert_eq!(removed.status, StatusCode::NO_CONTENT);
    let (status, _, _) = download(&app, id, Some(&admin), None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(objects(&app), 0);
    let again = app.delete(&format!("/api/files/{id}"), &admin).await;
    assert_eq!(again.status, StatusCode::NOT_FOUND);
    let (status, _, _) = download(&app, "not-a-uuid", Some(&admin), None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn the_size_limit_takes_exactly_its_bytes_and_keeps_nothing_past_it() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    app.patch(
        "/admin/api/settings",
        &admin,
        json!({ "data": { "files.max_bytes": 1000 } }),
    )
    .await;
    let at_limit = upload(&app, &admin, "full.bin", vec![7; 1000], None).await;
    assert_eq!(at_limit.status, StatusCode::CREATED, "{at_limit:?}");
    let over = upload(&app, &admin, "over.bin", vec![7; 1001], None).await;
    assert_eq!(over.status, StatusCode::PAYLOAD_TOO_LARGE, "{over:?}");
    assert_eq!(over.code(), "PAYLOAD_TOO_LARGE");
    let far_over = upload(&app, &admin, "far.bin", vec![7; 300_000], None).await;
    assert_eq!(far_over.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(stored_files(&app).await, 1);
    assert_eq!(objects(&app), 1);

    // Over the JSON body limit (1 MiB) is fine below files.max_bytes.
    app.patch(
        "/admin/api/settings",
        &admin,
        json!({ "data": { "files.max_bytes": 3_000_000 } }),
    )
    .await;
    let big: Vec<u8> = (0..2_500_000u32).map(|i| (i % 251) as u8).collect();
    let stored = upload(&app, &admin, "big.bin", big.clone(), None).await;
    assert_eq!(stored.status, StatusCode::CREATED, "{stored:?}");
    let id = stored.data()["id"].as_str().unwrap();
    let (_, _, body) = download(&app, id, Some(&admin), None).await;
    assert_eq!(hex_sha256(&body), hex_sha256(&big));
}

#[tokio::test]
async fn uploads_are_checked_before_anything_is_kept() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let lying = upload_to(
        &app,
        &app.address,
        &admin,
        "x.png",
        "image/png",
        b"<svg onload=alert(1)>".to_vec(),
        None,
    )
    .await;
    assert_eq!(lying.status, StatusCode::BAD_REQUEST, "{lying:?}");
    assert_eq!(lying.body["errors"][0]["field"], "file");
    let png = upload_to(
        &app,
        &app.address,
        &admin,
        "x.png",
        "image/png",
        PNG.to_vec(),
        None,
    )
    .await;
    assert_eq!(png.status, StatusCode::CREATED, "{png:?}");
    let sniffed = upload_to(
        &app,
        &app.address,
        &admin,
        "doc",
        "application/octet-stream",
        b"%PDF-1.7 ...".to_vec(),
        None,
    )
    .await;
    assert_eq!(sniffed.data()["contentType"], "application/pdf");
    let page = upload_to(
        &app,
        &app.address,
        &admin,
        "page.html",
        "text/html",
        b"<script>alert(1)</script>".to_vec(),
        None,
    )
    .await;
    let (_, headers, _) = download(
        &app,
        page.data()["id"].as_str().unwrap(),
        Some(&admin),
        None,
    )
    .await;
    assert!(
        headers[header::CONTENT_DISPOSITION]
            .to_str()
            .unwrap()
            .starts_with("attachment;")
    );
    assert!(
        headers[header::CONTENT_SECURITY_POLICY]
            .to_str()
            .unwrap()
            .contains("sandbox")
    );

    let bad_visibility = upload(&app, &admin, "a.txt", b"a".to_vec(), Some("SECRET")).await;
    assert_eq!(bad_visibility.body["errors"][0]["field"], "visibility");
    let json_body = app.post("/api/files", &admin, json!({ "data": {} })).await;
    assert_eq!(json_body.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let empty_form = app
        .client
        .post(format!("{}/api/files", app.address))
        .bearer_auth(&admin)
        .multipart(reqwest::multipart::Form::new().text("visibility", "PUBLIC"))
        .send()
        .await
        .unwrap();
    let empty_form = TestApp::answer(empty_form).await;
    assert_eq!(empty_form.body["errors"][0]["field"], "file");
    let anonymous = upload(&app, "", "a.txt", b"a".to_vec(), None).await;
    assert_eq!(anonymous.status, StatusCode::UNAUTHORIZED);
    assert_eq!(stored_files(&app).await, 3);
    assert_eq!(objects(&app), 3);
}

#[tokio::test]
async fn public_files_need_no_credential_and_private_ones_follow_grants_and_row_filters() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let public = upload(
        &app,
        &admin,
        "logo.txt",
        b"public bytes".to_vec(),
        Some("PUBLIC"),
    )
    .await;
    let public_id = public.data()["id"].as_str().unwrap().to_owned();
    let private = upload(&app, &admin, "secret.txt", b"private bytes".to_vec(), None).await;
    let private_id = private.data()["id"].as_str().unwrap().to_owned();

    // The records' table is a hidden resource, granted like any other.
    let resources = app.get("/admin/api/resources", &admin).await;
    let files = resources
        .data()
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["schema"] == "svc" && r["table"] == "files")
        .expect("svc.files is registered")
        .clone();
    assert_eq!(files["id"], FILES_RESOURCE);
    assert_eq!(files["exposedMethods"], json!([]));

    let (status, headers, body) = download(&app, &public_id, None, None).await;
    assert_eq!((status, body), (StatusCode::OK, b"public bytes".to_vec()));
    assert_eq!(headers[header::CACHE_CONTROL], "public, max-age=3600");
    let meta = app.get(&format!("/api/files/{public_id}/meta"), "").await;
    assert_eq!(meta.data()["visibility"], "PUBLIC");
    let (status, _, _) = download(&app, &private_id, None, None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let meta = app.get(&format!("/api/files/{private_id}/meta"), "").await;
    assert_eq!(meta.status, StatusCode::UNAUTHORIZED);

    // A user without grants: refused; with row-filtered grants: only their own.
    let outsider_role = create_role(&app, &admin, "outsiders").await;
    let (_, outsider) = member(&app, &admin, "outsider@example.com", &outsider_role).await;
    let (status, _, _) = download(&app, &private_id, Some(&outsider), None).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(
        upload(&app, &outsider, "a.txt", b"a".to_vec(), None)
            .await
            .status,
        StatusCode::FORBIDDEN
    );

    let role = create_role(&app, &admin, "uploaders").await;
    let own = json!({ "owner_id": { "eq": "$USER.id" } });
    for action in ["read", "delete"] {
        grant(
            &app,
            &admin,
            &role,
            FILES_RESOURCE,
            action,
            own.clone(),
            Value::Null,
        )
        .await;
    }
    grant(
        &app,
        &admin,
        &role,
        FILES_RESOURCE,
        "create",
        own.clone(),
        Value::Null,
    )
    .await;
    let (ann_id, ann) = member(&app, &admin, "ann@example.com", &role).await;
    let (_, bob) = member(&app, &admin, "bob@example.com", &role).await;
    let anns = upload(&app, &ann, "ann.txt", b"ann's".to_vec(), None).await;
    assert_eq!(anns.status, StatusCode::CREATED, "{anns:?}");
    assert_eq!(anns.data()["ownerId"], ann_id);
    let anns_id = anns.data()["id"].as_str().unwrap();
    let bobs = upload(&app, &bob, "bob.txt", b"bob's".to_vec(), None).await;
    let bobs_id = bobs.data()["id"].as_str().unwrap();

    let (status, _, body) = download(&app, anns_id, Some(&ann), None).await;
    assert_eq!((status, body), (StatusCode::OK, b"ann's".to_vec()));
    let (status, _, _) = download(&app, bobs_id, Some(&ann), None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _, _) = download(&app, &private_id, Some(&ann), None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(
        app.get(&format!("/api/files/{bobs_id}/meta"), &ann)
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    // PUBLIC files are for everyone, grants or not.
    let (status, _, _) = download(&app, &public_id, Some(&ann), None).await;
    assert_eq!(status, StatusCode::OK);

    assert_eq!(
        app.delete(&format!("/api/files/{bobs_id}"), &ann)
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        app.delete(&format!("/api/files/{bobs_id}"), &bob)
            .await
            .status,
        StatusCode::NO_CONTENT
    );
    let (status, _, _) = download(&app, bobs_id, Some(&bob), None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _, _) = download(&app, anns_id, Some(&ann), None).await;
    assert_eq!(status, StatusCode::OK);
}

/// A moto S3 server on a free loopback port, stopped when dropped.
struct S3Emulator {
    child: std::process::Child,
    endpoint: String,
}

impl Drop for S3Emulator {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn s3_emulator(bucket: &str) -> S3Emulator {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = std::process::Command::new("python3")
        .args([
            "-m",
            "moto.server",
            "-H",
            "127.0.0.1",
            "-p",
            &port.to_string(),
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("moto (PyPI moto[server]; `cargo xtask test` installs it)");
    let emulator = S3Emulator {
        child,
        endpoint: format!("http://127.0.0.1:{port}"),
    };
    let client = reqwest::Client::new();
    for _ in 0..100 {
        if let Ok(made) = client
            .put(format!("{}/{bucket}", emulator.endpoint))
            .send()
            .await
            && made.status().is_success()
        {
            return emulator;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("the S3 emulator did not start");
}

#[tokio::test]
async fn two_instances_share_files_through_an_s3_bucket() {
    let emulator = s3_emulator("tessera-files").await;
    let endpoint = emulator.endpoint.clone();
    let app = spawn_app_with(move |config| {
        config.files = files::BlobsConfig::S3(files::S3Config {
            endpoint: Some(endpoint),
            bucket: "tessera-files".into(),
            region: "us-east-1".into(),
            access_key_id: "test".into(),
            secret_access_key: "test".into(),
        });
    })
    .await;
    let peer = app.spawn_peer().await;
    let admin = app.admin_session().await;
    // Past one part of a multipart upload (5 MiB).
    app.patch(
        "/admin/api/settings",
        &admin,
        json!({ "data": { "files.max_bytes": 12_000_000 } }),
    )
    .await;
    let bytes: Vec<u8> = (0..11_000_000u32).map(|i| (i % 253) as u8).collect();
    let created = upload_to(
        &app,
        &app.address,
        &admin,
        "big.bin",
        "application/octet-stream",
        bytes.clone(),
        None,
    )
    .await;
    assert_eq!(created.status, StatusCode::CREATED, "{created:?}");
    let id = created.data()["id"].as_str().unwrap();
    let (status, _, body) = download_from(&app, &peer, id, Some(&admin), None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        hex_sha256(&body),
        created.data()["sha256"].as_str().unwrap()
    );
    let (status, _, body) =
        download_from(&app, &peer, id, Some(&admin), Some("bytes=5242878-5242881")).await;
    assert_eq!(
        (status, body),
        (
            StatusCode::PARTIAL_CONTENT,
            bytes[5_242_878..=5_242_881].to_vec()
        )
    );

    let small = upload_to(
        &app,
        &peer,
        &admin,
        "peer.txt",
        "text/plain",
        b"from the peer".to_vec(),
        Some("PUBLIC"),
    )
    .await;
    let small_id = small.data()["id"].as_str().unwrap();
    let (status, _, body) = download_from(&app, &app.address, small_id, None, None).await;
    assert_eq!((status, body), (StatusCode::OK, b"from the peer".to_vec()));

    app.patch(
        "/admin/api/settings",
        &admin,
        json!({ "data": { "files.max_bytes": 6_000_000 } }),
    )
    .await;
    // Refused while streaming, after a part went to the bucket: the upload is aborted.
    let over = upload_to(
        &app,
        &peer,
        &admin,
        "over.bin",
        "application/octet-stream",
        bytes[..6_000_001].to_vec(),
        None,
    )
    .await;
    assert_eq!(over.status, StatusCode::PAYLOAD_TOO_LARGE);
    let deleted = app.delete(&format!("/api/files/{id}"), &admin).await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT);
    let (status, _, _) = download_from(&app, &peer, id, Some(&admin), None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let listing = reqwest::get(format!("{}/tessera-files", emulator.endpoint))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(!listing.contains(id), "{listing}");
    assert!(listing.contains(small_id), "{listing}");
}
