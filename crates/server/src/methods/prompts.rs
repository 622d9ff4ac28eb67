//! `prompts/list` and `prompts/get` for both client eras. Prompts are named like
//! tools (`{upstream}{separator}{name}`, unchanged on `prefix: never` routes) and
//! ordered the same way (config order, then name bytewise); `prompts/get` goes
//! to the owning upstream with the original name and the arguments byte for byte.

use http::Response;
use junction_protocol::jsonrpc::Id;

use super::Request;
use crate::admit;
use crate::context::{Cx, Target};
use crate::error::GatewayError;
use crate::forward::{self, raw_param};
use crate::response::Body;
use crate::views;

pub async fn list(cx: &Cx<'_>, id: &Id, r: Request<'_>) -> Result<Response<Body>, GatewayError> {
    let merged = admit::visible_list(cx, "prompts", views::prompts(cx).await);
    views::list_page(cx, id, r.params.as_ref(), &r.client, "prompts", &merged)
}

pub async fn get(cx: &Cx<'_>, id: &Id, r: Request<'_>) -> Result<Response<Body>, GatewayError> {
    let Target::Prompt { original, .. } = &r.target else {
        return Err(GatewayError::InvalidParams(
            "prompts/get needs params.name".into(),
        ));
    };
    let mut params = r.params.unwrap_or_default();
    params.insert("name".into(), raw_param(original)?);
    let method = ("prompts/get", "prompt");
    forward::forward_named(cx, id, &r.client, method, &r.target, params, None).await
}
