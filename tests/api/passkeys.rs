//! Passkeys (API.md 14) through HTTP with a software authenticator written
//! here: an ECDSA P-256 key that answers the server's options as a
//! browser's authenticator would (attestation "none", user verified).
//! Registration, discoverable sign-in, single-use ceremonies, counters,
//! uniform refusals, removal, the administrator's reset and the
//! administrators' rule.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use p256::ecdsa::{DerSignature, SigningKey, signature::Signer};
use reqwest::StatusCode;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use testkit::{Answer, TestApp, spawn_app, spawn_app_with};

/// The origin of the test app's public URL (`http://tessera.test`).
pub(crate) const ORIGIN: &str = "http://tessera.test";

fn b64(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

fn unb64(text: &Value) -> Vec<u8> {
    URL_SAFE_NO_PAD
        .decode(text.as_str().expect("base64url string"))
        .expect("base64url")
}

/// A CBOR header of major type `major` with argument `len`.
fn cbor_head(major: u8, len: usize) -> Vec<u8> {
    match len {
        0..=23 => vec![major << 5 | len as u8],
        24..=255 => vec![major << 5 | 24, len as u8],
        _ => {
            let mut head = vec![major << 5 | 25];
            head.extend((len as u16).to_be_bytes());
            head
        }
    }
}

fn cbor_bytes(bytes: &[u8]) -> Vec<u8> {
    [cbor_head(2, bytes.len()), bytes.to_vec()].concat()
}

fn cbor_text(text: &str) -> Vec<u8> {
    [cbor_head(3, text.len()), text.as_bytes().to_vec()].concat()
}

/// A software passkey: a resident P-256 credential of one account.
pub(crate) struct SoftPasskey {
    key: SigningKey,
    pub(crate) credential_id: Vec<u8>,
    user_handle: Vec<u8>,
    pub(crate) counter: u32,
    /// The flags of an assertion: user present and verified.
    flags: u8,
}

impl SoftPasskey {
    fn new_key() -> SigningKey {
        let seed = Sha256::digest(uuid::Uuid::now_v7().as_bytes());
        SigningKey::from_slice(&seed).expect("a P-256 scalar")
    }

    /// Creates a credential for `options` (the registration ceremony's
    /// `publicKey`) as a browser at `origin` would: the passkey and the
    /// answer to post.
    pub(crate) fn register(options: &Value, origin: &str) -> (Self, Value) {
        let key = Self::new_key();
        let credential_id = Sha256::digest(key.verifying_key().to_sec1_bytes()).to_vec();
        let passkey = SoftPasskey {
            key,
            credential_id,
            user_handle: unb64(&options["user"]["id"]),
            counter: 1,
            flags: 0x05,
        };
        let answer = passkey.attestation(options, origin);
        (passkey, answer)
    }

    fn attestation(&self, options: &Value, origin: &str) -> Value {
        let client_data = json!({
            "type": "webauthn.create",
            "challenge": options["challenge"],
            "origin": origin,
            "crossOrigin": false,
        })
        .to_string();
        let point = self.key.verifying_key().to_sec1_point(false);
        let point = point.as_bytes();
        let mut cose = vec![0xa5, 0x01, 0x02, 0x03, 0x26, 0x20, 0x01, 0x21, 0x58, 0x20];
        cose.extend(&point[1..33]);
        cose.extend([0x22, 0x58, 0x20]);
        cose.extend(&point[33..65]);
        let rp_id = options["rp"]["id"].as_str().expect("rp id");
        let mut auth_data = Sha256::digest(rp_id.as_bytes()).to_vec();
        // User present, user verified, attested credential data.
        auth_data.push(0x45);
        auth_data.extend(self.counter.to_be_bytes());
        auth_data.extend([0u8; 16]);
        auth_data.extend((self.credential_id.len() as u16).to_be_bytes());
        auth_data.extend(&self.credential_id);
        auth_data.extend(cose);
        let mut attestation = vec![0xa3];
        attestation.extend(cbor_text("fmt"));
        attestation.extend(cbor_text("none"));
        attestation.extend(cbor_text("attStmt"));
        attestation.push(0xa0);
        attestation.extend(cbor_text("authData"));
        attestation.extend(cbor_bytes(&auth_data));
        json!({
            "id": b64(&self.credential_id),
            "rawId": b64(&self.credential_id),
            "type": "public-key",
            "response": {
                "clientDataJSON": b64(client_data.as_bytes()),
                "attestationObject": b64(&attestation),
                "transports": ["internal"],
            },
            "clientExtensionResults": {},
        })
    }

    /// Answers a sign-in ceremony's `publicKey` options from `origin`,
    /// moving the counter on.
    pub(crate) fn assert(&mut self, options: &Value, origin: &str) -> Value {
        self.counter += 1;
        self.assertion(options, origin)
    }

    /// The assertion at the current counter.
    fn assertion(&self, options: &Value, origin: &str) -> Value {
        let client_data = json!({
            "type": "webauthn.get",
            "challenge": options["challenge"],
            "origin": origin,
            "crossOrigin": false,
        })
        .to_string();
        let rp_id = options["rpId"].as_str().expect("rpId");
        let mut auth_data = Sha256::digest(rp_id.as_bytes()).to_vec();
        auth_data.push(self.flags);
        auth_data.extend(self.counter.to_be_bytes());
        let mut signed = auth_data.clone();
        signed.extend(Sha256::digest(client_data.as_bytes()));
        let signature: DerSignature = self.key.sign(&signed);
        json!({
            "id": b64(&self.credential_id),
            "rawId": b64(&self.credential_id),
            "type": "public-key",
            "response": {
                "clientDataJSON": b64(client_data.as_bytes()),
                "authenticatorData": b64(&auth_data),
                "signature": b64(signature.as_bytes()),
                "userHandle": b64(&self.user_handle),
            },
            "clientExtensionResults": {},
        })
    }
}

async fn public(app: &TestApp, address: &str, path: &str, body: Value) -> Answer {
    let response = app
        .client
        .post(format!("{address}{path}"))
        .json(&body)
        .send()
        .await
        .expect("sent");
    TestApp::answer(response).await
}

/// Registers a software passkey for the holder of `session`.
pub(crate) async fn registered(app: &TestApp, session: &str, name: &str) -> (SoftPasskey, Value) {
    let start = app
        .post("/api/auth/passkeys/register/start", session, json!({}))
        .await;
    assert_eq!(start.status, StatusCode::OK, "{:?}", start.body);
    let (passkey, answer) = SoftPasskey::register(&start.data()["options"], ORIGIN);
    let finish = app
        .post(
            "/api/auth/passkeys/register/finish",
            session,
            json!({ "challengeId": start.data()["challengeId"], "credential": answer, "name": name }),
        )
        .await;
    assert_eq!(finish.status, StatusCode::CREATED, "{:?}", finish.body);
    (passkey, finish.data().clone())
}

/// A sign-in ceremony started at `address`: its id and options.
async fn login_start(app: &TestApp, address: &str) -> (String, Value) {
    let start = public(app, address, "/api/auth/passkeys/login/start", json!({})).await;
    assert_eq!(start.status, StatusCode::OK, "{:?}", start.body);
    (
        start.data()["challengeId"].as_str().unwrap().to_owned(),
        start.data()["options"].clone(),
    )
}

async fn login_finish(app: &TestApp, address: &str, id: &str, credential: &Value) -> Answer {
    public(
        app,
        address,
        "/api/auth/passkeys/login/finish",
        json!({ "challengeId": id, "credential": credential }),
    )
    .await
}

/// Signs in with `passkey`: the session.
pub(crate) async fn passkey_session(app: &TestApp, passkey: &mut SoftPasskey) -> String {
    let (id, options) = login_start(app, &app.address).await;
    let answer = passkey.assert(&options, ORIGIN);
    let signed_in = login_finish(app, &app.address, &id, &answer).await;
    assert_eq!(signed_in.status, StatusCode::OK, "{:?}", signed_in.body);
    signed_in.data()["token"].as_str().unwrap().to_owned()
}

fn assert_refused(answer: &Answer, what: &str) {
    assert_eq!(
        answer.status,
        StatusCode::UNAUTHORIZED,
        "{what}: {:?}",
        answer.body
    );
    assert_eq!(answer.code(), "AUTHENTICATION_REQUIRED", "{what}");
    assert_eq!(
        answer.body["errors"][0]["message"], "Invalid email or password",
        "{what}"
    );
}

#[tokio::test]
async fn a_passkey_registers_then_signs_in_once_per_ceremony() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    app.patch(
        "/admin/api/settings",
        &admin,
        json!({ "data": { "auth.account_rate_limit_per_minute": 0 } }),
    )
    .await;
    let user_id = app
        .create_user(&admin, "pk@example.com", "password-1", None)
        .await;
    let session = app.login("pk@example.com", "password-1").await;

    // The options: a discoverable credential with user verification, for
    // the public URL's host, the user's id as handle.
    let start = app
        .post("/api/auth/passkeys/register/start", &session, json!({}))
        .await;
    assert_eq!(start.status, StatusCode::OK, "{:?}", start.body);
    let options = &start.data()["options"];
    assert_eq!(options["rp"]["id"], "tessera.test");
    assert_eq!(options["authenticatorSelection"]["residentKey"], "required");
    assert_eq!(
        options["authenticatorSelection"]["userVerification"],
        "required"
    );
    assert_eq!(
        unb64(&options["user"]["id"]),
        uuid::Uuid::parse_str(&user_id).unwrap().as_bytes()
    );
    assert_eq!(options["user"]["name"], "pk@example.com");

    // An answer from another origin does not check out and stores nothing;
    // the ceremony is used by it.
    let (_, foreign) = SoftPasskey::register(options, "http://evil.test");
    let challenge_id = start.data()["challengeId"].clone();
    let refused = app
        .post(
            "/api/auth/passkeys/register/finish",
            &session,
            json!({ "challengeId": challenge_id, "credential": foreign }),
        )
        .await;
    assert_eq!(
        refused.status,
        StatusCode::BAD_REQUEST,
        "{:?}",
        refused.body
    );
    assert_eq!(refused.code(), "INVALID_PAYLOAD");
    let (_, good) = SoftPasskey::register(options, ORIGIN);
    let used = app
        .post(
            "/api/auth/passkeys/register/finish",
            &session,
            json!({ "challengeId": challenge_id, "credential": good }),
        )
        .await;
    assert_eq!(used.status, StatusCode::BAD_REQUEST, "{:?}", used.body);
    assert_eq!(
        app.get("/api/auth/passkeys", &session).await.data(),
        &json!([])
    );

    // Registered: listed, counted on the user object, named.
    let (mut passkey, shown) = registered(&app, &session, "Laptop").await;
    assert_eq!(shown["name"], "Laptop");
    assert_eq!(shown["lastUsedAt"], Value::Null);
    let listed = app.get("/api/auth/passkeys", &session).await;
    assert_eq!(listed.data().as_array().unwrap().len(), 1);
    assert_eq!(listed.data()[0]["id"], shown["id"]);
    let me = app.get("/api/auth/me", &session).await;
    assert_eq!(me.data()["mfa"], json!({ "totp": false, "passkeys": 1 }));
    // A second registration excludes the first credential.
    let again = app
        .post("/api/auth/passkeys/register/start", &session, json!({}))
        .await;
    let excluded = &again.data()["options"]["excludeCredentials"];
    assert_eq!(unb64(&excluded[0]["id"]), passkey.credential_id);

    // Sign-in: no email asked, the account found from the answer.
    let (id, options) = login_start(&app, &app.address).await;
    assert_eq!(options["rpId"], "tessera.test");
    assert_eq!(options["userVerification"], "required");
    let answer = passkey.assert(&options, ORIGIN);
    let signed_in = login_finish(&app, &app.address, &id, &answer).await;
    assert_eq!(signed_in.status, StatusCode::OK, "{:?}", signed_in.body);
    assert_eq!(signed_in.data()["user"]["email"], "pk@example.com");
    let token = signed_in.data()["token"].as_str().unwrap();
    assert_eq!(app.get("/api/auth/me", token).await.status, StatusCode::OK);
    let listed = app.get("/api/auth/passkeys", &session).await;
    assert!(listed.data()[0]["lastUsedAt"].is_string());

    // The same answer again: the ceremony is used.
    assert_refused(
        &login_finish(&app, &app.address, &id, &answer).await,
        "a replayed ceremony",
    );
    // A counter that did not move forward (a cloned authenticator).
    let (id, options) = login_start(&app, &app.address).await;
    let stale = passkey.assertion(&options, ORIGIN);
    assert_refused(
        &login_finish(&app, &app.address, &id, &stale).await,
        "a stale counter",
    );
    // A bad signature, another origin, a credential never registered, an
    // unverified user, a garbled answer, an unknown ceremony.
    let (id, options) = login_start(&app, &app.address).await;
    let mut forged = passkey.assert(&options, ORIGIN);
    let mut signature = unb64(&forged["response"]["signature"]);
    let last = signature.len() - 1;
    signature[last] ^= 1;
    forged["response"]["signature"] = json!(b64(&signature));
    assert_refused(
        &login_finish(&app, &app.address, &id, &forged).await,
        "a bad signature",
    );
    let (id, options) = login_start(&app, &app.address).await;
    let elsewhere = passkey.assert(&options, "http://evil.test");
    assert_refused(
        &login_finish(&app, &app.address, &id, &elsewhere).await,
        "another origin",
    );
    let (id, options) = login_start(&app, &app.address).await;
    let (mut stranger, _) = SoftPasskey::register(&again.data()["options"], ORIGIN);
    let unknown = stranger.assert(&options, ORIGIN);
    assert_refused(
        &login_finish(&app, &app.address, &id, &unknown).await,
        "an unknown credential",
    );
    let (id, options) = login_start(&app, &app.address).await;
    passkey.flags = 0x01;
    let unverified = passkey.assert(&options, ORIGIN);
    passkey.flags = 0x05;
    assert_refused(
        &login_finish(&app, &app.address, &id, &unverified).await,
        "no user verification",
    );
    let (id, _) = login_start(&app, &app.address).await;
    assert_refused(
        &login_finish(&app, &app.address, &id, &json!({ "id": "x" })).await,
        "a garbled answer",
    );
    let (_, options) = login_start(&app, &app.address).await;
    let answer = passkey.assert(&options, ORIGIN);
    assert_refused(
        &login_finish(&app, &app.address, "nope", &answer).await,
        "an unknown ceremony",
    );
    // Still good after all that.
    passkey_session(&app, &mut passkey).await;

    // An inactive account is refused like the rest.
    app.patch(
        &format!("/admin/api/users/{user_id}"),
        &admin,
        json!({ "data": { "active": false } }),
    )
    .await;
    let (id, options) = login_start(&app, &app.address).await;
    let answer = passkey.assert(&options, ORIGIN);
    assert_refused(
        &login_finish(&app, &app.address, &id, &answer).await,
        "an inactive account",
    );
    app.patch(
        &format!("/admin/api/users/{user_id}"),
        &admin,
        json!({ "data": { "active": true } }),
    )
    .await;

    // An unverified email is refused while verification is required, as
    // at a password's sign-in.
    let required = |on: bool| json!({ "data": { "auth.email_verification_required": on } });
    app.patch(
        &format!("/admin/api/users/{user_id}"),
        &admin,
        json!({ "data": { "emailVerified": false } }),
    )
    .await;
    app.patch("/admin/api/settings", &admin, required(true))
        .await;
    let (id, options) = login_start(&app, &app.address).await;
    let answer = passkey.assert(&options, ORIGIN);
    assert_refused(
        &login_finish(&app, &app.address, &id, &answer).await,
        "an unverified email",
    );
    app.patch(
        &format!("/admin/api/users/{user_id}"),
        &admin,
        json!({ "data": { "emailVerified": true } }),
    )
    .await;
    passkey_session(&app, &mut passkey).await;
    app.patch("/admin/api/settings", &admin, required(false))
        .await;

    // Removed: gone from the list, and it signs in no more.
    let session = passkey_session(&app, &mut passkey).await;
    let path = format!("/api/auth/passkeys/{}", shown["id"].as_str().unwrap());
    assert_eq!(
        app.delete(&path, &session).await.status,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        app.delete(&path, &session).await.status,
        StatusCode::NOT_FOUND
    );
    let (id, options) = login_start(&app, &app.address).await;
    let answer = passkey.assert(&options, ORIGIN);
    assert_refused(
        &login_finish(&app, &app.address, &id, &answer).await,
        "a removed passkey",
    );
    let me = app.get("/api/auth/me", &session).await;
    assert_eq!(me.data()["mfa"]["passkeys"], 0);
}

#[tokio::test]
async fn a_ceremony_started_on_one_instance_finishes_on_another() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    app.create_user(&admin, "two@example.com", "password-1", None)
        .await;
    let session = app.login("two@example.com", "password-1").await;
    let peer = app.spawn_peer().await;
    // Registration started here, finished there.
    let start = app
        .post("/api/auth/passkeys/register/start", &session, json!({}))
        .await;
    let (mut passkey, answer) = SoftPasskey::register(&start.data()["options"], ORIGIN);
    let response = app
        .client
        .post(format!("{peer}/api/auth/passkeys/register/finish"))
        .bearer_auth(&session)
        .json(&json!({ "challengeId": start.data()["challengeId"], "credential": answer }))
        .send()
        .await
        .expect("sent");
    let finished = TestApp::answer(response).await;
    assert_eq!(finished.status, StatusCode::CREATED, "{:?}", finished.body);
    assert_eq!(finished.data()["name"], "Passkey");
    // Sign-in started there, finished here; once.
    let (id, options) = login_start(&app, &peer).await;
    let answer = passkey.assert(&options, ORIGIN);
    let signed_in = login_finish(&app, &app.address, &id, &answer).await;
    assert_eq!(signed_in.status, StatusCode::OK, "{:?}", signed_in.body);
    assert_refused(
        &login_finish(&app, &peer, &id, &answer).await,
        "finished already",
    );
}

#[tokio::test]
async fn a_passkey_is_a_factor_for_administrators_and_their_reset_removes_it() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    // The rule holds the first administrator's session too: a token acts.
    let admin_token = app.create_token(&admin, "ADMIN").await;
    app.patch(
        "/admin/api/settings",
        &admin,
        json!({ "data": { "auth.mfa_required_for_admins": true } }),
    )
    .await;
    let admin = admin_token;
    let id = app
        .create_user(
            &admin,
            "boss@example.com",
            "password-1",
            Some(vec![crate::ADMINS_ROLE.into()]),
        )
        .await;
    let boss = app.login("boss@example.com", "password-1").await;
    let refused = app.get("/admin/api/users", &boss).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{:?}", refused.body);
    assert_eq!(refused.code(), "MFA_ENROLLMENT_REQUIRED");
    // The passkey routes are open to the enrolling session; with a passkey
    // the same session reaches the rest.
    let (mut passkey, _) = registered(&app, &boss, "Key").await;
    assert_eq!(
        app.get("/admin/api/users", &boss).await.status,
        StatusCode::OK
    );
    let signed_in = passkey_session(&app, &mut passkey).await;
    assert_eq!(
        app.get("/admin/api/users", &signed_in).await.status,
        StatusCode::OK
    );

    // The administrators' reset removes passkeys too and ends the person's
    // sessions (API.md 21): signed in again, the person is held at
    // enrollment, and the passkey signs in no more.
    let reset = app
        .delete(&format!("/admin/api/users/{id}/mfa"), &admin)
        .await;
    assert_eq!(reset.status, StatusCode::NO_CONTENT, "{:?}", reset.body);
    for ended in [&signed_in, &boss] {
        assert_eq!(
            app.get("/admin/api/users", ended).await.code(),
            "SESSION_EXPIRED"
        );
    }
    let again = app.login("boss@example.com", "password-1").await;
    assert_eq!(
        app.get("/admin/api/users", &again).await.code(),
        "MFA_ENROLLMENT_REQUIRED"
    );
    let (challenge, options) = login_start(&app, &app.address).await;
    let answer = passkey.assert(&options, ORIGIN);
    assert_refused(
        &login_finish(&app, &app.address, &challenge, &answer).await,
        "a reset passkey",
    );
}

#[tokio::test]
async fn passkeys_need_a_relying_party_with_a_domain_name() {
    // Reached by IP address and nothing set: no relying party.
    let app = spawn_app_with(|config| config.public_url = "http://127.0.0.1:9".into()).await;
    let admin = app.admin_session().await;
    let methods = public_get(&app, "/api/auth/methods").await;
    assert_eq!(methods.data()["passkeys"], false);
    let refused = app
        .post("/api/auth/passkeys/register/start", &admin, json!({}))
        .await;
    assert_eq!(refused.status, StatusCode::CONFLICT, "{:?}", refused.body);
    assert!(
        refused.body["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("auth.passkey_rp_id")
    );
    let refused = public(
        &app,
        &app.address,
        "/api/auth/passkeys/login/start",
        json!({}),
    )
    .await;
    assert_eq!(refused.status, StatusCode::CONFLICT, "{:?}", refused.body);
    // An origin off the relying party's domain is refused too.
    let set = app
        .patch(
            "/admin/api/settings",
            &admin,
            json!({ "data": { "auth.passkey_rp_id": "localhost", "auth.passkey_origins": ["http://elsewhere.test"] } }),
        )
        .await;
    assert_eq!(set.status, StatusCode::OK, "{:?}", set.body);
    assert_eq!(
        public_get(&app, "/api/auth/methods").await.data()["passkeys"],
        false
    );
    // Both set: passkeys work on that name.
    app.patch(
        "/admin/api/settings",
        &admin,
        json!({ "data": { "auth.passkey_origins": ["http://localhost:8080"] } }),
    )
    .await;
    assert_eq!(
        public_get(&app, "/api/auth/methods").await.data()["passkeys"],
        true
    );
    let start = app
        .post("/api/auth/passkeys/register/start", &admin, json!({}))
        .await;
    assert_eq!(start.data()["options"]["rp"]["id"], "localhost");
    let (_, answer) = SoftPasskey::register(&start.data()["options"], "http://localhost:8080");
    let finished = app
        .post(
            "/api/auth/passkeys/register/finish",
            &admin,
            json!({ "challengeId": start.data()["challengeId"], "credential": answer }),
        )
        .await;
    assert_eq!(finished.status, StatusCode::CREATED, "{:?}", finished.body);
    // Settings are checked: no wildcard origin, no IP address as the id.
    for bad in [
        json!({ "auth.passkey_origins": ["*"] }),
        json!({ "auth.passkey_rp_id": "127.0.0.1" }),
    ] {
        let refused = app
            .patch("/admin/api/settings", &admin, json!({ "data": bad }))
            .await;
        assert_eq!(
            refused.status,
            StatusCode::BAD_REQUEST,
            "{bad}: {:?}",
            refused.body
        );
    }
}

async fn public_get(app: &TestApp, path: &str) -> Answer {
    let response = app
        .client
        .get(format!("{}{path}", app.address))
        .send()
        .await
        .expect("sent");
    TestApp::answer(response).await
}

#[tokio::test]
async fn an_unverified_registrant_makes_nothing_that_outlives_the_owners_reset() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    app.patch(
        "/admin/api/settings",
        &admin,
        json!({ "data": { "auth.registration_enabled": true } }),
    )
    .await;
    // Someone registers the owner's address first, with a passkey and a token.
    let signed_up = public(
        &app,
        &app.address,
        "/api/auth/register",
        json!({ "email": "owner@example.com", "password": "registrant-1" }),
    )
    .await;
    assert_eq!(
        signed_up.status,
        StatusCode::CREATED,
        "{:?}",
        signed_up.body
    );
    // Nothing that outlives a reset is made before the address is proven
    // (API.md 17): no passkey, no TOTP, no token.
    let registrant = app.login("owner@example.com", "registrant-1").await;
    let makers = [
        ("/api/auth/passkeys/register/start", json!({})),
        ("/api/auth/mfa/totp", json!({})),
        (
            "/api/auth/tokens",
            json!({ "name": "keep", "lifetimeDays": 30, "plane": "API" }),
        ),
    ];
    for (path, body) in makers.clone() {
        let refused = app.post(path, &registrant, body).await;
        assert_eq!(refused.status, StatusCode::FORBIDDEN, "{path}");
        assert_eq!(refused.code(), "EMAIL_NOT_VERIFIED", "{path}");
    }
    // The owner resets the password through the address.
    let asked = public(
        &app,
        &app.address,
        "/api/auth/password/forgot",
        json!({ "email": "owner@example.com" }),
    )
    .await;
    assert_eq!(asked.status, StatusCode::NO_CONTENT);
    let link = app
        .emailed_token("owner@example.com", "reset-password")
        .await;
    let reset = public(
        &app,
        &app.address,
        "/api/auth/password/reset",
        json!({ "token": link, "password": "the-owner-1" }),
    )
    .await;
    assert_eq!(reset.status, StatusCode::NO_CONTENT, "{:?}", reset.body);
    assert_eq!(
        app.get("/api/auth/me", &registrant).await.status,
        StatusCode::UNAUTHORIZED
    );
    let owner = app.login("owner@example.com", "the-owner-1").await;
    let me = app.get("/api/auth/me", &owner).await;
    assert_eq!(me.data()["emailVerified"], true);
    assert_eq!(me.data()["mfa"]["passkeys"], 0);
    // The control: with the address proven, the same requests pass.
    for (path, body) in makers {
        let made = app.post(path, &owner, body).await;
        assert!(made.status.is_success(), "{path}: {:?}", made.body);
    }
}

#[tokio::test]
async fn a_passkey_is_not_stored_for_a_session_that_ended_during_its_registration() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let user_id = app
        .create_user(&admin, "ended@example.com", "password-1", None)
        .await;
    let session = app.login("ended@example.com", "password-1").await;
    let start = app
        .post("/api/auth/passkeys/register/start", &session, json!({}))
        .await;
    let (_, answer) = SoftPasskey::register(&start.data()["options"], ORIGIN);
    let me = app.get("/api/auth/sessions", &session).await;
    let session_id = me.data()[0]["id"].as_str().unwrap().parse().unwrap();
    // The caller as the route resolved it, before its session ends (as a
    // claim of the account or a sign-out elsewhere ends it) while the
    // registration is being finished: the store's own check refuses it.
    let caller = permissions::Principal {
        user_id: user_id.parse().unwrap(),
        credential: permissions::Credential::Session { id: session_id },
        role_ids: vec![kernel::USERS_ROLE_ID],
        api_access: true,
        admin: false,
        timezone: None,
    };
    assert_eq!(
        app.post("/api/auth/logout", &session, json!({}))
            .await
            .status,
        StatusCode::NO_CONTENT
    );
    let finished = app
        .services
        .passkeys
        .finish_registration(
            &caller,
            start.data()["challengeId"].as_str().unwrap(),
            answer,
            None,
            &auth::Origin::default(),
        )
        .await;
    assert!(
        matches!(finished, Err(auth::AuthError::SessionExpired)),
        "{finished:?}"
    );
    let stored = app.services.passkeys.list(&caller).await.unwrap();
    assert!(stored.is_empty(), "{stored:?}");
}

#[tokio::test]
async fn sign_in_ceremonies_in_flight_are_bounded() {
    let app = spawn_app().await;
    // As many live sign-in ceremonies as the service keeps.
    app.db
        .sql(
            "INSERT INTO svc.webauthn_challenges (token_hash, kind, state, expires_at) \
             SELECT sha256(int8send(i)), 'login', '{}', now() + interval '5 minutes' \
             FROM generate_series(1, 10000) i",
        )
        .await;
    let full = public(
        &app,
        &app.address,
        "/api/auth/passkeys/login/start",
        json!({}),
    )
    .await;
    assert_eq!(
        full.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{:?}",
        full.body
    );
    // Expired ones make room as starts come.
    app.db
        .sql("UPDATE svc.webauthn_challenges SET expires_at = now() - interval '1 second'")
        .await;
    let started = public(
        &app,
        &app.address,
        "/api/auth/passkeys/login/start",
        json!({}),
    )
    .await;
    assert_eq!(started.status, StatusCode::OK, "{:?}", started.body);
}
