//! A real SMTP server on a loopback port that keeps what it receives, for
//! tests that read the emails the service sends. It can be stopped and
//! started again on the same port.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

/// One received email.
#[derive(Debug, Clone)]
pub struct ReceivedEmail {
    /// Envelope recipients.
    pub to: Vec<String>,
    /// The message as sent, quoted-printable soft breaks and escapes decoded.
    pub text: String,
}

impl ReceivedEmail {
    /// The first link to `page` (such as `reset-password`) with its token.
    pub fn link(&self, page: &str) -> Option<String> {
        self.text
            .split(|c: char| c.is_whitespace() || c == '"' || c == '<')
            .find(|part| part.starts_with("http") && part.contains(page) && part.contains("token="))
            .map(str::to_owned)
    }

    /// The token of the first link to `page`.
    pub fn token(&self, page: &str) -> Option<String> {
        let link = self.link(page)?;
        Some(link.split("token=").nth(1)?.split('&').next()?.to_owned())
    }
}

#[derive(Default)]
struct Inbox {
    emails: Mutex<Vec<ReceivedEmail>>,
    arrived: Notify,
    /// How long the sink takes to accept each email.
    delay: Duration,
}

/// The running (or stopped) sink.
pub struct SmtpSink {
    port: u16,
    inbox: Arc<Inbox>,
    server: Option<JoinHandle<()>>,
}

fn decode_quoted_printable(raw: &str) -> String {
    let joined = raw.replace("=\r\n", "").replace("=\n", "");
    let bytes = joined.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'='
            && i + 2 < bytes.len()
            && let Some(Ok(byte)) = joined
                .get(i + 1..i + 3)
                .map(|hex| u8::from_str_radix(hex, 16))
        {
            out.push(byte);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

async fn session(stream: TcpStream, inbox: Arc<Inbox>) -> std::io::Result<()> {
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read);
    write.write_all(b"220 sink ESMTP\r\n").await?;
    let mut to = Vec::new();
    let mut line = String::new();
    loop {
        line.clear();
        if lines.read_line(&mut line).await? == 0 {
            return Ok(());
        }
        let command = line.trim_end().to_ascii_uppercase();
        let reply: &[u8] = if command.starts_with("EHLO") || command.starts_with("HELO") {
            b"250-sink\r\n250 8BITMIME\r\n"
        } else if command.starts_with("RCPT TO:") {
            to.push(
                line.trim_end()[8..]
                    .trim()
                    .trim_matches(['<', '>'])
                    .to_owned(),
            );
            b"250 OK\r\n"
        } else if command.starts_with("DATA") {
            write.write_all(b"354 go ahead\r\n").await?;
            let mut data = String::new();
            loop {
                line.clear();
                if lines.read_line(&mut line).await? == 0 {
                    return Ok(());
                }
                if line == ".\r\n" || line == ".\n" {
                    break;
                }
                data.push_str(
                    line.strip_prefix('.')
                        .filter(|_| line.starts_with(".."))
                        .unwrap_or(&line),
                );
            }
            tokio::time::sleep(inbox.delay).await;
            let email = ReceivedEmail {
                to: std::mem::take(&mut to),
                text: decode_quoted_printable(&data),
            };
            inbox.emails.lock().unwrap().push(email);
            inbox.arrived.notify_waiters();
            b"250 OK queued\r\n"
        } else if command.starts_with("QUIT") {
            write.write_all(b"221 bye\r\n").await?;
            return Ok(());
        } else {
            b"250 OK\r\n"
        };
        write.write_all(reply).await?;
    }
}

async fn serve(listener: TcpListener, inbox: Arc<Inbox>) {
    let mut sessions = tokio::task::JoinSet::new();
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        sessions.spawn(session(stream, inbox.clone()));
    }
}

impl SmtpSink {
    /// Starts a sink on a free loopback port.
    pub async fn start() -> Self {
        Self::start_slow(Duration::ZERO).await
    }

    /// Starts a sink that takes `delay` to accept each email.
    pub async fn start_slow(delay: Duration) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind sink");
        let port = listener.local_addr().expect("sink address").port();
        let inbox = Arc::new(Inbox {
            delay,
            ..Inbox::default()
        });
        let server = Some(tokio::spawn(serve(listener, inbox.clone())));
        Self {
            port,
            inbox,
            server,
        }
    }

    /// `smtp://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("smtp://127.0.0.1:{}", self.port)
    }

    /// Stops listening and drops every open session: the mail server is down.
    pub fn stop(&mut self) {
        if let Some(server) = self.server.take() {
            server.abort();
        }
    }

    /// Listens again on the same port.
    pub async fn restart(&mut self) {
        self.stop();
        let mut listener = None;
        for _ in 0..50 {
            match TcpListener::bind(("127.0.0.1", self.port)).await {
                Ok(l) => {
                    listener = Some(l);
                    break;
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
        let listener = listener.expect("sink port free again");
        self.server = Some(tokio::spawn(serve(listener, self.inbox.clone())));
    }

    /// Every email received so far.
    pub fn emails(&self) -> Vec<ReceivedEmail> {
        self.inbox.emails.lock().unwrap().clone()
    }

    /// Waits up to `timeout` for an email to `to` whose text contains `needle`.
    pub async fn wait_for(&self, to: &str, needle: &str, timeout: Duration) -> ReceivedEmail {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let arrived = self.inbox.arrived.notified();
            if let Some(email) = self.emails().into_iter().find(|e| {
                e.to.iter().any(|t| t.eq_ignore_ascii_case(to)) && e.text.contains(needle)
            }) {
                return email;
            }
            if tokio::time::timeout_at(deadline, arrived).await.is_err() {
                panic!(
                    "no email to {to} containing {needle:?} within {timeout:?}; got {:?}",
                    self.emails()
                );
            }
        }
    }
}

impl Drop for SmtpSink {
    fn drop(&mut self) {
        self.stop();
    }
}
