//! A mock OAuth 2.0 / OpenID Connect provider on a loopback port: discovery,
//! authorize (answers at once with a code), a token endpoint that checks the
//! client and the PKCE verifier, Google-style userinfo, GitHub-style user and
//! emails, and JWKS; ID tokens are signed with test keys, or broken on purpose.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use actix_web::dev::ServerHandle;
use actix_web::{App, HttpRequest, HttpResponse, HttpServer, web};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use openidconnect::core::{
    CoreIdToken, CoreIdTokenClaims, CoreJsonWebKeySet, CoreJwsSigningAlgorithm,
    CoreRsaPrivateSigningKey,
};
use openidconnect::{
    Audience, EmptyAdditionalClaims, EndUserEmail, EndUserName, IssuerUrl, JsonWebKeyId, Nonce,
    PrivateSigningKey, StandardClaims, SubjectIdentifier,
};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// The client id the mock knows.
pub const MOCK_CLIENT_ID: &str = "tessera-test-client";
/// That client's secret.
pub const MOCK_CLIENT_SECRET: &str = "tessera-test-secret";

/// Test-only RSA keys (PKCS#1 PEM); never used outside tests.
const KEYS: [&str; 2] = [
    include_str!("../keys/mock-provider-1.pem"),
    include_str!("../keys/mock-provider-2.pem"),
];

/// The person the provider says signed in.
#[derive(Debug, Clone)]
pub struct MockUser {
    /// Stable id (`sub`; GitHub's numeric `id`).
    pub subject: String,
    /// Email.
    pub email: String,
    /// Whether the provider says it is verified.
    pub email_verified: bool,
    /// Display name.
    pub name: String,
}

/// Which claims the provider gives where (all of them everywhere by
/// default), to play providers that leave some out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClaimsShape {
    /// The email (and its verification) in the ID token, else in userinfo only.
    pub email_in_id_token: bool,
    /// The name in the ID token, else in userinfo only.
    pub name_in_id_token: bool,
    /// `email_verified` said at all (Microsoft Entra ID never says it).
    pub email_verified_said: bool,
}

impl Default for ClaimsShape {
    fn default() -> Self {
        Self {
            email_in_id_token: true,
            name_in_id_token: true,
            email_verified_said: true,
        }
    }
}

/// A way the next ID tokens are wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdTokenFault {
    /// A correct token.
    None,
    /// Another nonce than the one of the authorize request.
    WrongNonce,
    /// Expired a minute ago.
    Expired,
    /// Signed by a key the JWKS does not hold, under the published key id.
    BadSignature,
    /// Issued for another client.
    WrongAudience,
    /// From another issuer.
    WrongIssuer,
}

struct Grant {
    challenge: String,
    method: String,
    nonce: Option<String>,
    redirect_uri: String,
}

struct MockState {
    base: String,
    user: MockUser,
    fault: IdTokenFault,
    claims: ClaimsShape,
    key: usize,
    grants: HashMap<String, Grant>,
    access_tokens: Vec<String>,
    authorize_queries: Vec<HashMap<String, String>>,
}

/// The running mock provider.
pub struct MockProvider {
    /// `http://127.0.0.1:<port>`: the OIDC issuer and the base of every endpoint.
    pub url: String,
    state: Arc<Mutex<MockState>>,
    handle: ServerHandle,
}

fn random() -> String {
    let mut bytes = [0u8; 24];
    rand::RngCore::fill_bytes(&mut rand::rng(), &mut bytes);
    URL_SAFE_NO_PAD.encode(bytes)
}

fn signing_key(index: usize) -> CoreRsaPrivateSigningKey {
    CoreRsaPrivateSigningKey::from_pem(
        KEYS[index],
        Some(JsonWebKeyId::new(format!("key-{}", index + 1))),
    )
    .expect("test key parses")
}

impl MockProvider {
    /// Starts the provider with a verified user `person@example.com`.
    pub async fn start() -> Self {
        let state = Arc::new(Mutex::new(MockState {
            base: String::new(),
            user: MockUser {
                subject: "mock-subject-1".into(),
                email: "person@example.com".into(),
                email_verified: true,
                name: "Pat Person".into(),
            },
            fault: IdTokenFault::None,
            claims: ClaimsShape::default(),
            key: 0,
            grants: HashMap::new(),
            access_tokens: Vec::new(),
            authorize_queries: Vec::new(),
        }));
        let shared = web::Data::new(state.clone());
        let server = HttpServer::new(move || {
            App::new()
                .app_data(shared.clone())
                .route(
                    "/.well-known/openid-configuration",
                    web::get().to(discovery),
                )
                .route("/authorize", web::get().to(authorize))
                .route("/token", web::post().to(token))
                .route("/userinfo", web::get().to(userinfo))
                .route("/user", web::get().to(github_user))
                .route("/user/emails", web::get().to(github_emails))
                .route("/jwks", web::get().to(jwks))
        })
        .workers(1)
        .bind(("127.0.0.1", 0))
        .expect("mock provider binds");
        let port = server.addrs()[0].port();
        let server = server.run();
        let handle = server.handle();
        tokio::spawn(server);
        let url = format!("http://127.0.0.1:{port}");
        state.lock().unwrap().base = url.clone();
        Self { url, state, handle }
    }

    /// Who signs in next.
    pub fn set_user(&self, user: MockUser) {
        self.state.lock().unwrap().user = user;
    }

    /// Which claims the next ID tokens and userinfo answers carry.
    pub fn set_claims(&self, claims: ClaimsShape) {
        self.state.lock().unwrap().claims = claims;
    }

    /// Breaks (or mends) the next ID tokens.
    pub fn set_fault(&self, fault: IdTokenFault) {
        self.state.lock().unwrap().fault = fault;
    }

    /// Signs with the other key, under a new key id, and publishes only it.
    pub fn rotate_key(&self) {
        let mut state = self.state.lock().unwrap();
        state.key = 1 - state.key;
    }

    /// The query of the last authorize request.
    pub fn last_authorize(&self) -> HashMap<String, String> {
        self.state
            .lock()
            .unwrap()
            .authorize_queries
            .last()
            .cloned()
            .unwrap_or_default()
    }

    /// The `auth.oauth` settings of `provider` pointing at this mock.
    pub fn settings(&self, provider: &str) -> Value {
        let u = &self.url;
        match provider {
            "oidc" => json!({ "enabled": true, "clientId": MOCK_CLIENT_ID,
                              "clientSecret": MOCK_CLIENT_SECRET, "issuer": u }),
            "github" => json!({ "enabled": true, "clientId": MOCK_CLIENT_ID,
                                "clientSecret": MOCK_CLIENT_SECRET,
                                "authorizeUrl": format!("{u}/authorize"),
                                "tokenUrl": format!("{u}/token"), "apiUrl": u }),
            _ => json!({ "enabled": true, "clientId": MOCK_CLIENT_ID,
                         "clientSecret": MOCK_CLIENT_SECRET,
                         "authorizeUrl": format!("{u}/authorize"),
                         "tokenUrl": format!("{u}/token"),
                         "userinfoUrl": format!("{u}/userinfo") }),
        }
    }
}

impl Drop for MockProvider {
    fn drop(&mut self) {
        let handle = self.handle.clone();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move { handle.stop(false).await });
        }
    }
}

type Shared = web::Data<Arc<Mutex<MockState>>>;

async fn discovery(state: Shared) -> HttpResponse {
    let base = state.lock().unwrap().base.clone();
    HttpResponse::Ok().json(json!({
        "issuer": base,
        "authorization_endpoint": format!("{base}/authorize"),
        "token_endpoint": format!("{base}/token"),
        "userinfo_endpoint": format!("{base}/userinfo"),
        "jwks_uri": format!("{base}/jwks"),
        "response_types_supported": ["code"],
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": ["RS256"],
        "code_challenge_methods_supported": ["S256"],
    }))
}

/// Signs the person in at once and sends the browser back with a code.
async fn authorize(state: Shared, query: web::Query<HashMap<String, String>>) -> HttpResponse {
    let q = query.into_inner();
    let mut state = state.lock().unwrap();
    state.authorize_queries.push(q.clone());
    let (Some(redirect_uri), Some(challenge)) = (q.get("redirect_uri"), q.get("code_challenge"))
    else {
        return HttpResponse::BadRequest().body("redirect_uri and code_challenge are required");
    };
    if q.get("client_id").map(String::as_str) != Some(MOCK_CLIENT_ID) {
        return HttpResponse::BadRequest().body("unknown client");
    }
    let code = random();
    state.grants.insert(
        code.clone(),
        Grant {
            challenge: challenge.clone(),
            method: q.get("code_challenge_method").cloned().unwrap_or_default(),
            nonce: q.get("nonce").cloned(),
            redirect_uri: redirect_uri.clone(),
        },
    );
    let mut back = url::Url::parse(redirect_uri).expect("redirect_uri is a URL");
    back.query_pairs_mut()
        .append_pair("code", &code)
        .append_pair("state", q.get("state").map_or("", String::as_str));
    HttpResponse::Found()
        .insert_header(("Location", back.to_string()))
        .finish()
}

fn oauth_error(error: &str) -> HttpResponse {
    HttpResponse::BadRequest().json(json!({ "error": error }))
}

/// The client's id and secret, from HTTP Basic or from the form.
fn client_credentials(req: &HttpRequest, form: &HashMap<String, String>) -> (String, String) {
    let basic = req
        .headers()
        .get("Authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Basic "))
        .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
        .and_then(|b| String::from_utf8(b).ok());
    if let Some((id, secret)) = basic.as_deref().and_then(|b| b.split_once(':')) {
        let decode = |s: &str| {
            url::form_urlencoded::parse(format!("x={s}").as_bytes())
                .next()
                .map(|(_, v)| v.into_owned())
                .unwrap_or_default()
        };
        return (decode(id), decode(secret));
    }
    let field = |name: &str| form.get(name).cloned().unwrap_or_default();
    (field("client_id"), field("client_secret"))
}

/// Exchanges a code: the client, the redirect URI and the PKCE verifier must match.
async fn token(
    state: Shared,
    req: HttpRequest,
    form: web::Form<HashMap<String, String>>,
) -> HttpResponse {
    let f = form.into_inner();
    let mut state = state.lock().unwrap();
    if client_credentials(&req, &f) != (MOCK_CLIENT_ID.to_owned(), MOCK_CLIENT_SECRET.to_owned()) {
        return oauth_error("invalid_client");
    }
    let Some(grant) = f.get("code").and_then(|c| state.grants.remove(c)) else {
        return oauth_error("invalid_grant");
    };
    let verifier = f.get("code_verifier").cloned().unwrap_or_default();
    let computed = URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()));
    if grant.method != "S256"
        || computed != grant.challenge
        || f.get("redirect_uri") != Some(&grant.redirect_uri)
    {
        return oauth_error("invalid_grant");
    }
    let access = random();
    state.access_tokens.push(access.clone());
    let mut answer = json!({ "access_token": access, "token_type": "Bearer", "expires_in": 3600 });
    if let Some(nonce) = grant.nonce {
        answer["id_token"] = json!(id_token(&state, &nonce));
    }
    HttpResponse::Ok().json(answer)
}

fn id_token(state: &MockState, nonce: &str) -> String {
    let now = chrono::Utc::now();
    let fault = state.fault;
    let shape = state.claims;
    let issuer = if fault == IdTokenFault::WrongIssuer {
        "http://127.0.0.1:1/other".to_owned()
    } else {
        state.base.clone()
    };
    let audience = if fault == IdTokenFault::WrongAudience {
        "someone-else"
    } else {
        MOCK_CLIENT_ID
    };
    let expires = if fault == IdTokenFault::Expired {
        now - chrono::Duration::seconds(60)
    } else {
        now + chrono::Duration::seconds(300)
    };
    let nonce = if fault == IdTokenFault::WrongNonce {
        "not-the-nonce"
    } else {
        nonce
    };
    let claims = CoreIdTokenClaims::new(
        IssuerUrl::new(issuer).expect("issuer"),
        vec![Audience::new(audience.to_owned())],
        expires,
        now - chrono::Duration::seconds(120),
        StandardClaims::new(SubjectIdentifier::new(state.user.subject.clone()))
            .set_email(
                shape
                    .email_in_id_token
                    .then(|| EndUserEmail::new(state.user.email.clone())),
            )
            .set_email_verified(
                (shape.email_in_id_token && shape.email_verified_said)
                    .then_some(state.user.email_verified),
            )
            .set_name(
                shape
                    .name_in_id_token
                    .then(|| EndUserName::new(state.user.name.clone()).into()),
            ),
        EmptyAdditionalClaims {},
    )
    .set_nonce(Some(Nonce::new(nonce.to_owned())));
    let key = if fault == IdTokenFault::BadSignature {
        CoreRsaPrivateSigningKey::from_pem(
            KEYS[1 - state.key],
            Some(JsonWebKeyId::new(format!("key-{}", state.key + 1))),
        )
        .expect("test key parses")
    } else {
        signing_key(state.key)
    };
    CoreIdToken::new(
        claims,
        &key,
        CoreJwsSigningAlgorithm::RsaSsaPkcs1V15Sha256,
        None,
        None,
    )
    .expect("ID token signs")
    .to_string()
}

fn bearer_ok(state: &MockState, req: &HttpRequest) -> bool {
    req.headers()
        .get("Authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|t| state.access_tokens.iter().any(|a| a == t))
}

async fn userinfo(state: Shared, req: HttpRequest) -> HttpResponse {
    let state = state.lock().unwrap();
    if !bearer_ok(&state, &req) {
        return HttpResponse::Unauthorized().finish();
    }
    let u = &state.user;
    let mut info = json!({ "sub": u.subject, "email": u.email, "name": u.name });
    if state.claims.email_verified_said {
        info["email_verified"] = json!(u.email_verified);
    }
    HttpResponse::Ok().json(info)
}

async fn github_user(state: Shared, req: HttpRequest) -> HttpResponse {
    let state = state.lock().unwrap();
    if !bearer_ok(&state, &req) {
        return HttpResponse::Unauthorized().finish();
    }
    let u = &state.user;
    let id: u64 = u.subject.parse().unwrap_or(4242);
    HttpResponse::Ok().json(json!({ "id": id, "login": "pat", "name": u.name }))
}

/// A secondary verified address first, so only the primary one may count.
async fn github_emails(state: Shared, req: HttpRequest) -> HttpResponse {
    let state = state.lock().unwrap();
    if !bearer_ok(&state, &req) {
        return HttpResponse::Unauthorized().finish();
    }
    let u = &state.user;
    HttpResponse::Ok().json(json!([
        { "email": "secondary@example.org", "primary": false, "verified": true },
        { "email": u.email, "primary": true, "verified": u.email_verified },
    ]))
}

async fn jwks(state: Shared) -> HttpResponse {
    let key = signing_key(state.lock().unwrap().key);
    HttpResponse::Ok().json(CoreJsonWebKeySet::new(vec![key.as_verification_key()]))
}
