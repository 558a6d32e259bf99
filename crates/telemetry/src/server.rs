//! The HTTP side of telemetry: an actix-web server answering
//! `GET /metrics` with [`metrics()`](crate::metrics()) in the text
//! exposition format and `GET /healthz` with a small JSON body.
//!
//! `/healthz` answers 200 while the process lives: `{"service": ...,
//! "ok": true}`. A component that may be up but not ready (an OAuth
//! issuer not reached yet) reports itself with [`report_health`]: then the
//! body also holds `"ready"` (every component ready) and each component's
//! detail under its name, and `GET /readyz` answers the same body with 200
//! when ready, 503 when not (without such components it is always 200).
//!
//! [`MetricsServer::start`] binds the configured address (port 0 picks a
//! free port; [`MetricsServer::local_addr`] reports the real one), runs one
//! worker, ignores OS signals (the process's root token handles those) and
//! stops when its cancellation token fires. It owns the listening socket
//! and the task running the server; dropping the handle leaves the server
//! running until the token fires.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use actix_web::http::header::ContentType;
use actix_web::{App, HttpResponse, HttpServer, web};
use tokio_util::sync::CancellationToken;

/// Errors of the telemetry layer.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// The metrics address could not be bound.
    #[error("cannot serve metrics on {addr}: {reason}")]
    Bind {
        /// The address asked for.
        addr: String,
        /// Why (shown in the message, so not chained as a source too).
        reason: std::io::Error,
    },
}

/// Seconds a request in flight may take to finish once the server stops.
const SHUTDOWN_GRACE_SECS: u64 = 2;

/// A running metrics and health server.
#[derive(Debug)]
pub struct MetricsServer {
    addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

#[derive(Debug, Clone)]
struct Service(String);

impl MetricsServer {
    /// Serve `/metrics` and `/healthz` for `service` on `addr`
    /// (`HOST:PORT`) until `cancel` fires. Records `service` in
    /// `codemode_service_info`. Must be called inside a tokio runtime.
    pub async fn start(addr: &str, service: &str, cancel: CancellationToken) -> Result<Self, TelemetryError> {
        let bind_error = |reason| TelemetryError::Bind { addr: addr.to_string(), reason };
        crate::metrics().set_service(service);
        let data = web::Data::new(Service(service.to_string()));
        let server = HttpServer::new(move || {
            App::new()
                .app_data(data.clone())
                .route("/metrics", web::get().to(render_metrics))
                .route("/healthz", web::get().to(healthz))
                .route("/readyz", web::get().to(readyz))
        })
        .workers(1)
        .shutdown_timeout(SHUTDOWN_GRACE_SECS)
        .client_request_timeout(Duration::from_secs(5))
        .shutdown_signal(cancel.cancelled_owned())
        .bind(addr)
        .map_err(bind_error)?;
        let bound = server.addrs();
        let local =
            *bound.first().ok_or_else(|| bind_error(std::io::Error::other("the address resolved to nothing")))?;
        let running = server.run();
        let service = service.to_string();
        let task = tokio::spawn(async move {
            if let Err(e) = running.await {
                tracing::warn!(%service, error = %e, "the metrics server stopped with an error");
            }
        });
        tracing::info!(addr = %local, "serving /metrics and /healthz");
        Ok(Self { addr: local, task })
    }

    /// The address the server listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Wait until the server has stopped (after its token fired).
    pub async fn stopped(self) {
        let _ = self.task.await;
    }
}

async fn render_metrics() -> HttpResponse {
    HttpResponse::Ok().content_type(prometheus::TEXT_FORMAT).body(crate::metrics().render())
}

async fn healthz(service: web::Data<Service>) -> HttpResponse {
    let (_, body) = health(&service.0);
    HttpResponse::Ok().content_type(ContentType::json()).body(body.to_string())
}

async fn readyz(service: web::Data<Service>) -> HttpResponse {
    let (ready, body) = health(&service.0);
    let mut answer = if ready { HttpResponse::Ok() } else { HttpResponse::ServiceUnavailable() };
    answer.content_type(ContentType::json()).body(body.to_string())
}

/// What one component says on `/healthz`.
#[derive(Debug, Clone, PartialEq)]
pub struct ComponentHealth {
    /// Whether it is ready (`/readyz` answers 503 while one is not).
    pub ready: bool,
    /// What `/healthz` shows under its name.
    pub detail: serde_json::Value,
}

type Check = Box<dyn Fn() -> ComponentHealth + Send + Sync>;

/// The components reporting, by registration.
static COMPONENTS: Mutex<Vec<(u64, String, Check)>> = Mutex::new(Vec::new());
static NEXT_COMPONENT: AtomicU64 = AtomicU64::new(0);

/// Show what `check` says under `name` on `/healthz`, and count it in
/// readiness, until the returned handle is dropped. `check` is called on
/// every request: it must answer at once (read a value, never wait).
pub fn report_health(name: &str, check: impl Fn() -> ComponentHealth + Send + Sync + 'static) -> HealthReport {
    let id = NEXT_COMPONENT.fetch_add(1, Ordering::Relaxed);
    COMPONENTS.lock().unwrap_or_else(PoisonError::into_inner).push((id, name.to_string(), Box::new(check)));
    HealthReport { id }
}

/// A component's place on `/healthz` (see [`report_health`]); dropping it
/// removes the component.
#[derive(Debug)]
#[must_use = "the component leaves /healthz when this is dropped"]
pub struct HealthReport {
    id: u64,
}

impl Drop for HealthReport {
    fn drop(&mut self) {
        COMPONENTS.lock().unwrap_or_else(PoisonError::into_inner).retain(|(id, _, _)| *id != self.id);
    }
}

/// Whether every component is ready, and the `/healthz` body.
fn health(service: &str) -> (bool, serde_json::Value) {
    let mut body = serde_json::json!({ "service": service, "ok": true });
    let components = COMPONENTS.lock().unwrap_or_else(PoisonError::into_inner);
    if components.is_empty() {
        return (true, body);
    }
    let mut ready = true;
    for (_, name, check) in components.iter() {
        let health = check();
        ready &= health.ready;
        body[name.as_str()] = health.detail;
    }
    body["ready"] = ready.into();
    (ready, body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_component_not_ready_shows_its_detail_on_healthz_and_makes_readyz_false_until_it_leaves() {
        let (ready, body) = health("frontend");
        assert!(ready);
        assert_eq!(body, serde_json::json!({"service": "frontend", "ok": true}), "no component: the plain body");
        let report = report_health("oauth_issuer", || ComponentHealth {
            ready: false,
            detail: serde_json::json!({"reachable": false}),
        });
        let (ready, body) = health("frontend");
        assert!(!ready);
        assert_eq!(body["ok"], true, "still alive");
        assert_eq!(body["ready"], false);
        assert_eq!(body["oauth_issuer"]["reachable"], false);
        drop(report);
        assert_eq!(health("frontend"), (true, serde_json::json!({"service": "frontend", "ok": true})));
    }
}
