//! The conversations with providers: the authorize URL, the code exchange
//! with the PKCE verifier, and reading who signed in (OIDC: the ID token
//! checked against the issuer's keys; Google: userinfo; GitHub: its API).

use std::sync::Arc;
use std::time::{Duration, Instant};

use kernel::Clock;
use oauth2::basic::BasicClient;
use oauth2::{
    AuthType, AuthUrl, AuthorizationCode, ClientId, ClientSecret, CsrfToken, PkceCodeChallenge,
    PkceCodeVerifier, RedirectUrl, Scope, TokenResponse as _, TokenUrl,
};
use openidconnect::core::{
    CoreAuthenticationFlow, CoreClient, CoreIdTokenClaims, CoreProviderMetadata, CoreUserInfoClaims,
};
use openidconnect::{
    ClaimsVerificationError, EndpointMaybeSet, EndpointNotSet, EndpointSet, IssuerUrl, Nonce,
    SignatureVerificationError, TokenResponse as _,
};
use serde::Deserialize;
use tokio::sync::Mutex;
use url::Url;

use crate::provider::{Provider, ProviderConfig};

/// How long a discovered OIDC configuration (with its keys) is trusted
/// before it is fetched again; an unknown key id refreshes it at once.
const DISCOVERY_TTL: Duration = Duration::from_secs(3600);
/// Longest wait for any provider answer.
const PROVIDER_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest provider answer read (discovery, keys, tokens, user data).
const ANSWER_MAX: usize = 1 << 20;

/// Why a request to a provider got no usable answer.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ProviderHttpError {
    /// Transport, timeout or a malformed request.
    #[error(transparent)]
    Http(#[from] reqwest::Error),
    /// The answer could not be rebuilt.
    #[error(transparent)]
    Build(#[from] oauth2::http::Error),
    /// The answer is larger than [`ANSWER_MAX`].
    #[error("the answer is larger than 1 MiB")]
    TooLarge,
}

/// Why a flow failed at the provider: a short reason for the audit log and a
/// detail for the server log. The browser only learns `OAUTH_FAILED`.
#[derive(Debug)]
pub(crate) struct Failure {
    pub reason: &'static str,
    pub detail: String,
}

fn failure(reason: &'static str) -> impl FnOnce(String) -> Failure {
    move |detail| Failure { reason, detail }
}

/// Who signed in, as the provider tells it.
#[derive(Debug, Clone)]
pub(crate) struct ProviderIdentity {
    pub subject: String,
    pub email: Option<String>,
    /// The provider's word on the email: `None` when it says nothing
    /// (a provider's `trustEmail` decides then).
    pub email_verified: Option<bool>,
    pub name: Option<String>,
}

/// The secrets of one flow that the callback needs.
pub(crate) struct FlowSecrets<'a> {
    pub state: &'a str,
    pub pkce_verifier: &'a str,
    pub nonce: Option<&'a str>,
}

type OidcClient = CoreClient<
    EndpointSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointMaybeSet,
    EndpointMaybeSet,
>;

struct Discovered {
    issuer: String,
    metadata: CoreProviderMetadata,
    fetched: Instant,
}

/// Talks to the providers; holds the HTTP client and the one discovered
/// OIDC configuration.
pub(crate) struct Protocol {
    http: reqwest::Client,
    clock: Arc<dyn Clock>,
    discovered: Mutex<Option<Discovered>>,
}

impl Protocol {
    /// A client that never follows redirects (they would open SSRF paths)
    /// and gives up after [`PROVIDER_TIMEOUT`].
    pub fn new(clock: Arc<dyn Clock>) -> Result<Self, reqwest::Error> {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(PROVIDER_TIMEOUT)
            .user_agent("tessera")
            .build()?;
        Ok(Self {
            http,
            clock,
            discovered: Mutex::new(None),
        })
    }

    /// Sends one request for the OAuth libraries, reading at most
    /// [`ANSWER_MAX`] bytes of the answer.
    async fn send(
        &self,
        request: oauth2::HttpRequest,
    ) -> Result<oauth2::HttpResponse, ProviderHttpError> {
        let (parts, body) = request.into_parts();
        let mut response = self
            .http
            .request(parts.method, parts.uri.to_string())
            .headers(parts.headers)
            .body(body)
            .send()
            .await?;
        let mut answer = oauth2::http::Response::builder().status(response.status());
        for (name, value) in response.headers() {
            answer = answer.header(name, value);
        }
        let mut bytes = Vec::new();
        while let Some(chunk) = response.chunk().await? {
            if bytes.len() + chunk.len() > ANSWER_MAX {
                return Err(ProviderHttpError::TooLarge);
            }
            bytes.extend_from_slice(&chunk);
        }
        Ok(answer.body(bytes)?)
    }

    /// Where to send the browser: the provider's authorize URL with
    /// `state`, the PKCE S256 challenge of the verifier, and for OIDC the nonce.
    pub async fn authorize_url(
        &self,
        provider: Provider,
        config: &ProviderConfig,
        redirect_uri: &str,
        flow: &FlowSecrets<'_>,
    ) -> Result<Url, Failure> {
        let challenge = PkceCodeChallenge::from_code_verifier_sha256(&PkceCodeVerifier::new(
            flow.pkce_verifier.to_owned(),
        ));
        let state = flow.state.to_owned();
        let state = move || CsrfToken::new(state);
        if provider == Provider::Oidc {
            let client = self.oidc_client(config, redirect_uri, false).await?;
            let nonce = flow.nonce.unwrap_or_default().to_owned();
            let (url, _, _) = client
                .authorize_url(
                    CoreAuthenticationFlow::AuthorizationCode,
                    state,
                    move || Nonce::new(nonce),
                )
                .add_scope(Scope::new("email".into()))
                .add_scope(Scope::new("profile".into()))
                .set_pkce_challenge(challenge)
                .url();
            return Ok(url);
        }
        let scopes: &[&str] = match provider {
            Provider::Github => &["read:user", "user:email"],
            _ => &["openid", "email", "profile"],
        };
        let client = oauth_client(config, redirect_uri)?;
        let (url, _) = scopes
            .iter()
            .fold(client.authorize_url(state), |request, scope| {
                request.add_scope(Scope::new((*scope).to_owned()))
            })
            .set_pkce_challenge(challenge)
            .url();
        Ok(url)
    }

    /// Exchanges the code (with the PKCE verifier) and reads who signed in.
    pub async fn identity(
        &self,
        provider: Provider,
        config: &ProviderConfig,
        redirect_uri: &str,
        code: &str,
        flow: &FlowSecrets<'_>,
    ) -> Result<ProviderIdentity, Failure> {
        let code = AuthorizationCode::new(code.to_owned());
        let verifier = PkceCodeVerifier::new(flow.pkce_verifier.to_owned());
        if provider == Provider::Oidc {
            return self
                .oidc_identity(config, redirect_uri, code, verifier, flow.nonce)
                .await;
        }
        let token = oauth_client(config, redirect_uri)?
            .exchange_code(code)
            .set_pkce_verifier(verifier)
            .request_async(&|request| self.send(request))
            .await
            .map_err(|e| failure("token_exchange")(e.to_string()))?;
        let access = token.access_token().secret();
        match provider {
            Provider::Github => self.github_identity(config, access).await,
            _ => self.google_identity(config, access).await,
        }
    }

    async fn get_json<T: for<'de> Deserialize<'de>>(
        &self,
        url: &str,
        access: &str,
    ) -> Result<T, Failure> {
        let fail = failure("provider_api");
        let request = oauth2::http::Request::get(url)
            .header(
                oauth2::http::header::AUTHORIZATION,
                format!("Bearer {access}"),
            )
            .header(oauth2::http::header::ACCEPT, "application/json")
            .body(Vec::new())
            .map_err(|e| failure("configuration")(e.to_string()))?;
        let answer = self
            .send(request)
            .await
            .map_err(|e| failure("provider_api")(e.to_string()))?;
        if !answer.status().is_success() {
            return Err(fail(format!("{url} answered {}", answer.status())));
        }
        serde_json::from_slice(answer.body()).map_err(|e| fail(e.to_string()))
    }

    async fn google_identity(
        &self,
        config: &ProviderConfig,
        access: &str,
    ) -> Result<ProviderIdentity, Failure> {
        #[derive(Deserialize)]
        struct UserInfo {
            sub: String,
            email: Option<String>,
            email_verified: Option<bool>,
            name: Option<String>,
        }
        let info: UserInfo = self.get_json(&config.userinfo_url, access).await?;
        Ok(ProviderIdentity {
            subject: info.sub,
            email: info.email,
            email_verified: info.email_verified,
            name: info.name,
        })
    }

    /// GitHub's user, and its primary email with GitHub's word on whether it is verified.
    async fn github_identity(
        &self,
        config: &ProviderConfig,
        access: &str,
    ) -> Result<ProviderIdentity, Failure> {
        #[derive(Deserialize)]
        struct GithubUser {
            id: u64,
            name: Option<String>,
        }
        #[derive(Deserialize)]
        struct GithubEmail {
            email: String,
            primary: bool,
            verified: bool,
        }
        let base = config.api_url.trim_end_matches('/');
        let user: GithubUser = self.get_json(&format!("{base}/user"), access).await?;
        let emails: Vec<GithubEmail> = self
            .get_json(&format!("{base}/user/emails"), access)
            .await?;
        let primary = emails.into_iter().find(|e| e.primary);
        Ok(ProviderIdentity {
            subject: user.id.to_string(),
            email_verified: primary.as_ref().map(|e| e.verified),
            email: primary.map(|e| e.email),
            name: user.name,
        })
    }

    /// The issuer's configuration and keys, fetched again when older than
    /// [`DISCOVERY_TTL`], for another issuer, or when `refresh` is asked.
    async fn metadata(&self, issuer: &str, refresh: bool) -> Result<CoreProviderMetadata, Failure> {
        let mut cached = self.discovered.lock().await;
        if let Some(d) = cached.as_ref()
            && !refresh
            && d.issuer == issuer
            && d.fetched.elapsed() < DISCOVERY_TTL
        {
            return Ok(d.metadata.clone());
        }
        let issuer_url =
            IssuerUrl::new(issuer.to_owned()).map_err(|e| failure("discovery")(e.to_string()))?;
        let metadata = CoreProviderMetadata::discover_async(issuer_url, &|r| self.send(r))
            .await
            .map_err(|e| failure("discovery")(e.to_string()))?;
        *cached = Some(Discovered {
            issuer: issuer.to_owned(),
            metadata: metadata.clone(),
            fetched: Instant::now(),
        });
        Ok(metadata)
    }

    async fn oidc_client(
        &self,
        config: &ProviderConfig,
        redirect_uri: &str,
        refresh: bool,
    ) -> Result<OidcClient, Failure> {
        let metadata = self.metadata(&config.issuer, refresh).await?;
        let redirect = RedirectUrl::new(redirect_uri.to_owned())
            .map_err(|e| failure("configuration")(e.to_string()))?;
        Ok(CoreClient::from_provider_metadata(
            metadata,
            ClientId::new(config.client_id.clone()),
            config.client_secret.clone().map(ClientSecret::new),
        )
        .set_redirect_uri(redirect))
    }

    async fn oidc_identity(
        &self,
        config: &ProviderConfig,
        redirect_uri: &str,
        code: AuthorizationCode,
        verifier: PkceCodeVerifier,
        nonce: Option<&str>,
    ) -> Result<ProviderIdentity, Failure> {
        let client = self.oidc_client(config, redirect_uri, false).await?;
        let response = client
            .exchange_code(code)
            .map_err(|e| failure("configuration")(e.to_string()))?
            .set_pkce_verifier(verifier)
            .request_async(&|r| self.send(r))
            .await
            .map_err(|e| failure("token_exchange")(e.to_string()))?;
        let id_token = response
            .id_token()
            .ok_or_else(|| failure("id_token")("no ID token in the answer".into()))?;
        let nonce = Nonce::new(nonce.unwrap_or_default().to_owned());
        let check = |client: &OidcClient| -> Result<CoreIdTokenClaims, ClaimsVerificationError> {
            let clock = self.clock.clone();
            let verifier = client.id_token_verifier().set_time_fn(move || clock.now());
            id_token.claims(&verifier, &nonce).cloned()
        };
        let (client, claims) = match check(&client) {
            // The issuer may have rotated its keys: fetch them again, once.
            Err(ClaimsVerificationError::SignatureVerification(
                SignatureVerificationError::NoMatchingKey,
            )) => {
                let fresh = self.oidc_client(config, redirect_uri, true).await?;
                let claims = check(&fresh);
                (fresh, claims)
            }
            other => (client, other),
        };
        let claims = claims.map_err(|e| failure("id_token")(e.to_string()))?;
        let mut identity = ProviderIdentity {
            subject: claims.subject().as_str().to_owned(),
            email: claims.email().map(|e| e.as_str().to_owned()),
            email_verified: claims.email_verified(),
            name: claims
                .name()
                .and_then(|n| n.get(None))
                .map(|n| n.as_str().to_owned()),
        };
        // What the ID token leaves out (the email, its verification, the
        // name), userinfo may tell.
        let partial = identity.email.is_none()
            || identity.email_verified.is_none()
            || identity.name.is_none();
        if partial
            && let Ok(request) = client.user_info(
                response.access_token().clone(),
                Some(claims.subject().clone()),
            )
        {
            let info: CoreUserInfoClaims = request
                .request_async(&|r| self.send(r))
                .await
                .map_err(|e| failure("userinfo")(e.to_string()))?;
            // An explicit `false` from either source is kept.
            let said = |verified: Option<bool>| match identity.email_verified {
                Some(false) => Some(false),
                _ => verified,
            };
            if identity.email.is_none() {
                identity.email_verified = said(info.email_verified());
                identity.email = info.email().map(|e| e.as_str().to_owned());
            } else if identity.email_verified.is_none()
                && info.email().map(|e| e.as_str()) == identity.email.as_deref()
            {
                identity.email_verified = said(info.email_verified());
            }
            if identity.name.is_none() {
                identity.name = info
                    .name()
                    .and_then(|n| n.get(None))
                    .map(|n| n.as_str().to_owned());
            }
        }
        Ok(identity)
    }
}

/// An OAuth 2.0 client for Google or GitHub; credentials go in the request
/// body, which both accept.
fn oauth_client(
    config: &ProviderConfig,
    redirect_uri: &str,
) -> Result<
    BasicClient<EndpointSet, EndpointNotSet, EndpointNotSet, EndpointNotSet, EndpointSet>,
    Failure,
> {
    let bad = |e: url::ParseError| failure("configuration")(e.to_string());
    let mut client = BasicClient::new(ClientId::new(config.client_id.clone()))
        .set_auth_uri(AuthUrl::new(config.authorize_url.clone()).map_err(bad)?)
        .set_token_uri(TokenUrl::new(config.token_url.clone()).map_err(bad)?)
        .set_redirect_uri(RedirectUrl::new(redirect_uri.to_owned()).map_err(bad)?)
        .set_auth_type(AuthType::RequestBody);
    if let Some(secret) = &config.client_secret {
        client = client.set_client_secret(ClientSecret::new(secret.clone()));
    }
    Ok(client)
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// A one-shot HTTP server answering `body_len` bytes; answers its URL.
    async fn serve(body_len: usize) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let url = format!(
            "http://{}/keys",
            listener.local_addr().unwrap_or_else(|e| panic!("{e}"))
        );
        tokio::spawn(async move {
            if let Ok((mut socket, _)) = listener.accept().await {
                let mut request = [0u8; 1024];
                let _ = socket.read(&mut request).await;
                let head = format!("HTTP/1.1 200 OK\r\ncontent-length: {body_len}\r\n\r\n");
                let _ = socket.write_all(head.as_bytes()).await;
                let _ = socket.write_all(&vec![b'a'; body_len]).await;
            }
        });
        url
    }

    #[tokio::test]
    #[allow(clippy::panic, reason = "test")]
    async fn provider_answers_are_read_up_to_a_mebibyte() {
        let protocol =
            Protocol::new(Arc::new(kernel::SystemClock)).unwrap_or_else(|e| panic!("{e}"));
        let get = |url: String| {
            oauth2::http::Request::get(url)
                .body(Vec::new())
                .unwrap_or_else(|e| panic!("{e}"))
        };
        let small = protocol.send(get(serve(1000).await)).await;
        assert_eq!(small.map(|a| a.body().len()).ok(), Some(1000));
        let huge = protocol.send(get(serve(ANSWER_MAX + 1).await)).await;
        assert!(matches!(huge, Err(ProviderHttpError::TooLarge)));
    }
}
