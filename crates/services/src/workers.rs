//! The background work of one process, on Tokio alone: the email outbox,
//! scheduled and database-event workflow runs with their sweeps (orphaned
//! runs, purges), and the cache watcher. A host that serves no HTTP starts
//! them as the server does.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::Services;

/// The running workers of a [`Services`] ([`Services::start_workers`]).
/// [`Workers::stop`] hands their work over; dropped without it, they stop
/// at once and their claims come back to other instances only when the
/// leases expire.
#[must_use = "the workers stop when dropped: keep them, and call stop on shutdown"]
pub struct Workers {
    stop: watch::Sender<bool>,
    mail: Option<JoinHandle<()>>,
    runs: Option<JoinHandle<()>>,
    caches: Option<JoinHandle<()>>,
    workflows: workflows::WorkflowService,
}

impl Services {
    /// Starts the workers on the current Tokio runtime: the email outbox
    /// (SMTP at `config.smtp_url`, else emails are logged), the workflow
    /// worker (schedules, row events, orphaned runs, purges) and, with
    /// `config.listen_for_changes`, the cache watcher. Once per process.
    pub fn start_workers(&self) -> anyhow::Result<Workers> {
        let config = &self.config;
        let mailer = mail::MailWorker::new(
            Arc::new(self.store.clone()),
            config.smtp_url.as_deref(),
            &config.smtp_from,
            config.mail_poll,
            config.outbox_lease,
        )
        .context("cannot build the email worker")?;
        if config.smtp_url.is_none() {
            tracing::warn!("no SMTP server is set: emails stay in the outbox and are logged");
        }
        let (stop, stopping) = watch::channel(false);
        Ok(Workers {
            stop,
            mail: Some(tokio::spawn(mailer.run(stopping))),
            runs: Some(tokio::spawn(self.workflows.clone().work())),
            // Behind a transaction pooler a session keeps no LISTEN.
            caches: (config.listen_for_changes && !config.database_transaction_pooler)
                .then(|| self.store.watch_caches()),
            workflows: self.workflows.clone(),
        })
    }
}

impl Workers {
    /// Stops the workers and hands their work over: the workflow worker
    /// claims nothing more; the email worker finishes the email it is
    /// sending and gives the rest of its claim back; running workflow runs
    /// get `grace` to end, and those still going are released, so another
    /// instance takes both over at once rather than when the leases
    /// expire. Answers how many runs were released.
    pub async fn stop(mut self, grace: Duration) -> anyhow::Result<u64> {
        // First: a pass under way would claim runs after their release.
        if let Some(runs) = self.runs.take() {
            runs.abort();
            let _ = runs.await;
        }
        let _ = self.stop.send(true);
        let mail = self.mail.take();
        let mail = async {
            if let Some(mail) = mail
                && tokio::time::timeout(grace, mail).await.is_err()
            {
                tracing::warn!("stopping: an email was still being sent");
            }
        };
        let ((), released) = tokio::join!(mail, self.workflows.drain(grace));
        Ok(released?)
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        for task in [self.runs.take(), self.mail.take(), self.caches.take()]
            .into_iter()
            .flatten()
        {
            task.abort();
        }
    }
}
