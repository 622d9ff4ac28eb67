//! The one method table, and the handlers it names. A row says everything
//! the pipeline needs to know about a method: its metric label, the eras that
//! have it, the param a modern client mirrors in `Mcp-Name`, what it is routed
//! by (`resolve::Route`) and its handler. Adding a method is one row plus its
//! handler.
//!
//! Each handler file serves one family of methods and never imports another
//! handler: what two of them share sits below them (`views`, `forward`,
//! `bridge`, `admit`, `context`). A handler runs after the pipeline resolved
//! and admitted its target, so it only shapes the request and the answer.

use futures_util::future::BoxFuture;
use http::Response;
use junction_protocol::jsonrpc::{Id, RawParams};

use crate::context::{ClientSide, Cx, Target};
use crate::error::GatewayError;
use crate::resolve::Route;
use crate::response::Body;

mod completion;
mod lifecycle;
mod prompts;
mod resources;
mod subscriptions;
mod tasks;
mod tools;

pub use lifecycle::{cancelled, delete_session};
pub use subscriptions::legacy_get;

/// A request as the pipeline hands it to its handler.
pub struct Request<'a> {
    pub params: Option<RawParams<'a>>,
    pub client: ClientSide,
    pub target: Target,
}

pub type Handler = for<'a> fn(
    &'a Cx<'_>,
    &'a Id,
    Request<'a>,
) -> BoxFuture<'a, Result<Response<Body>, GatewayError>>;

/// Which eras have a method.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Eras {
    Modern,
    Legacy,
    Both,
}

pub struct Method {
    /// The JSON-RPC method, also its metric label.
    pub name: &'static str,
    pub eras: Eras,
    /// The param a modern client mirrors in `Mcp-Name` (NOTES §4.1).
    pub mirrored: Option<&'static str>,
    pub route: Route,
    pub handler: Handler,
}

impl Method {
    pub fn serves(&self, modern: bool) -> bool {
        match self.eras {
            Eras::Both => true,
            Eras::Modern => modern,
            Eras::Legacy => !modern,
        }
    }
}

/// A handler as a `Handler`: its future boxed, so the table holds one type.
macro_rules! handler {
    ($f:path) => {{
        fn boxed<'a>(
            cx: &'a Cx<'_>,
            id: &'a Id,
            r: Request<'a>,
        ) -> BoxFuture<'a, Result<Response<Body>, GatewayError>> {
            // Written into its box, not moved there: `Box::pin` builds the
            // future on the stack and copies it whole (a few KiB a call).
            let fut = Box::write(Box::new_uninit(), $f(cx, id, r));
            Box::into_pin(fut)
        }
        boxed as Handler
    }};
}

macro_rules! row {
    ($name:literal, $eras:ident, $mirrored:expr, $route:ident, $f:path) => {
        Method {
            name: $name,
            eras: Eras::$eras,
            mirrored: $mirrored,
            route: Route::$route,
            handler: handler!($f),
        }
    };
}

/// Every method Junction serves. A method of no row, or of a row that is not
/// of the request's era, is "method not found" in that era's way.
pub static METHODS: [Method; 19] = [
    row!("initialize", Legacy, None, None, lifecycle::initialize),
    row!("ping", Legacy, None, None, lifecycle::ping),
    row!("server/discover", Modern, None, None, lifecycle::discover),
    row!("tools/list", Both, None, None, tools::list),
    row!("tools/call", Both, Some("name"), Tool, tools::call),
    row!("prompts/list", Both, None, None, prompts::list),
    row!("prompts/get", Both, Some("name"), Prompt, prompts::get),
    row!("resources/list", Both, None, None, resources::list),
    row!(
        "resources/read",
        Both,
        Some("uri"),
        Resource,
        resources::read
    ),
    row!(
        "resources/templates/list",
        Both,
        None,
        None,
        resources::templates
    ),
    row!(
        "subscriptions/listen",
        Modern,
        None,
        None,
        subscriptions::listen
    ),
    row!(
        "resources/subscribe",
        Legacy,
        None,
        None,
        subscriptions::subscribe
    ),
    row!(
        "resources/unsubscribe",
        Legacy,
        None,
        None,
        subscriptions::unsubscribe
    ),
    row!(
        "completion/complete",
        Both,
        None,
        Completion,
        completion::complete
    ),
    row!("logging/setLevel", Legacy, None, None, lifecycle::set_level),
    row!("tasks/get", Both, Some("taskId"), Task, tasks::get),
    row!("tasks/cancel", Both, Some("taskId"), Task, tasks::cancel),
    row!("tasks/update", Modern, Some("taskId"), Task, tasks::update),
    row!("tasks/result", Legacy, None, Task, tasks::result),
];

/// The row of `method` and its place in the table, if Junction serves it
/// in some era.
pub fn find(method: &str) -> Option<(usize, &'static Method)> {
    METHODS.iter().enumerate().find(|(_, m)| m.name == method)
}
