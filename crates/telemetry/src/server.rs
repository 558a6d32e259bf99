//! The HTTP side of telemetry: an actix-web server answering
//! `GET /metrics` with [`metrics()`](crate::metrics()) in the text
//! exposition format and `GET /healthz` with a small JSON body.
//!
//! [`MetricsServer::start`] binds the configured address (port 0 picks a
//! free port; [`MetricsServer::local_addr`] reports the real one), runs one
//! worker, ignores OS signals (the process's root token handles those) and
//! stops when its cancellation token fires. It owns the listening socket
//! and the task running the server; dropping the handle leaves the server
//! running until the token fires.

use std::net::SocketAddr;
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
    let body = serde_json::json!({ "service": service.0, "ok": true });
    HttpResponse::Ok().content_type(ContentType::json()).body(body.to_string())
}
