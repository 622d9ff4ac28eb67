//! Handshake-era clients: a modern upstream's `input_required` becomes real
//! JSON-RPC requests on the client's SSE stream; its answers go into the
//! retried upstream call (`inputResponses` + the upstream's own `requestState`,
//! a new id). A handshake-era upstream's own request is relayed the same way.

use std::borrow::Cow;

use bytes::Bytes;
use junction_protocol::codes;
use junction_protocol::jsonrpc::{self, error_bytes, RawParams, RpcError};
use junction_upstream::UpstreamRequest;
use serde::Deserialize;
use serde_json::value::RawValue;
use std::collections::BTreeMap;
use tokio::sync::mpsc;

use super::{capability_of, declared, held, Driver, Stash, MAX_ROUNDS};
use crate::error::GatewayError;

impl Driver {
    /// Handshake-era client, modern upstream asking: check what the client can
    /// answer before anything is sent.
    pub(super) fn legacy_ask(&self, raw: &RawValue) -> Result<Stash, GatewayError> {
        let ir: InputRequired = serde_json::from_str(raw.get())
            .map_err(|_| self.broken("bad input_required result"))?;
        let requests = ir.input_requests.unwrap_or_default();
        let mut missing = Vec::new();
        let mut asks = Vec::with_capacity(requests.len());
        for (key, req) in requests {
            if !declared(&self.caps, &req.method, req.params.as_deref()) {
                missing.push(capability_of(&req.method).to_owned());
            }
            asks.push((key, req.method, req.params));
        }
        if !missing.is_empty() {
            missing.sort();
            missing.dedup();
            return Err(GatewayError::MissingClientCapability {
                detail: format!(
                    "upstream {} needs client input this session did not declare at initialize: {}",
                    self.upstream(),
                    missing.join(", ")
                ),
                missing,
            });
        }
        if !self.sse_ok {
            return Err(GatewayError::MissingClientCapability {
                missing: vec!["text/event-stream".into()],
                detail: format!(
                    "upstream {} asks the client for input, which travels on an SSE response: send Accept: text/event-stream",
                    self.upstream()
                ),
            });
        }
        if self.rounds >= MAX_ROUNDS {
            return Err(self.broken("upstream kept asking for input"));
        }
        Ok(Stash::InputRequired {
            asks,
            state: ir.request_state,
        })
    }

    /// Ask a handshake-era client on its SSE stream; then answer the upstream
    /// (relay) or retry it with the answers (`input_required`).
    pub(super) async fn ask_client(
        &mut self,
        stash: Stash,
        tx: &mpsc::Sender<Bytes>,
    ) -> Result<(), Result<(Vec<u8>, &'static str), GatewayError>> {
        let principal = self.finish.principal.clone();
        let replica = self.replica.clone();
        let sealer = self.finish.sealer.clone();
        match stash {
            Stash::Relay(r) => {
                let answers = held::ask(
                    (&replica, &sealer),
                    &principal,
                    tx,
                    vec![(r.method.clone(), r.params)],
                )
                .await
                .map_err(Err)?;
                let outcome = answers
                    .into_iter()
                    .next()
                    .unwrap_or_else(|| Err(RpcError::new(codes::INTERNAL_ERROR, "no answer")));
                if let Some(stream) = self.stream.as_mut() {
                    stream
                        .reply(&r.id, outcome)
                        .await
                        .map_err(|e| Err(GatewayError::from_upstream(&self.finish.upstream, e)))?;
                }
                Ok(())
            }
            Stash::InputRequired { asks, state } => {
                self.rounds += 1;
                let questions = asks
                    .iter()
                    .map(|(_, m, p)| (m.clone(), p.clone()))
                    .collect();
                let answers = held::ask((&replica, &sealer), &principal, tx, questions)
                    .await
                    .map_err(Err)?;
                let mut responses: Vec<(String, Box<RawValue>)> = Vec::new();
                for ((key, _, _), answer) in asks.into_iter().zip(answers) {
                    match answer {
                        Ok(raw) => responses.push((key, raw)),
                        // The client refused: its error is the call's answer.
                        Err(err) => {
                            return Err(Ok((error_bytes(Some(&self.id), &err), "client_error")))
                        }
                    }
                }
                self.retry_upstream(responses, state).await.map_err(Err)
            }
        }
    }

    async fn retry_upstream(
        &mut self,
        responses: Vec<(String, Box<RawValue>)>,
        state: Option<Box<RawValue>>,
    ) -> Result<(), GatewayError> {
        let Some(retry) = self.retry.as_ref() else {
            return Err(self.broken("cannot retry this call"));
        };
        let mut request = copy_request(&retry.request);
        let params = &mut request.params;
        params.remove("requestState");
        let members = responses.iter().map(|(k, v)| (k.as_str(), v.as_ref()));
        params.insert(
            "inputResponses".into(),
            Cow::Owned(jsonrpc::raw_object(members)),
        );
        if let Some(s) = state {
            params.insert("requestState".into(), Cow::Owned(s));
        }
        self.stream = None;
        let stream = retry
            .client
            .request(request)
            .await
            .map_err(|e| GatewayError::from_upstream(&self.finish.upstream, e))?;
        self.stream = Some(stream);
        Ok(())
    }
}

/// A copy of a request that owns all of it, for retrying it later.
pub fn copy_request(r: &UpstreamRequest<'_>) -> UpstreamRequest<'static> {
    UpstreamRequest {
        method: r.method.clone(),
        params: owned_params(&r.params),
        meta: r.meta.clone(),
        client_capabilities: r
            .client_capabilities
            .as_deref()
            .map(|c| Cow::Owned(c.to_owned())),
        param_headers: r.param_headers.clone(),
        forward_headers: r.forward_headers.clone(),
        timeout: r.timeout,
        handshake_client: r.handshake_client,
        authorization: r.authorization.clone(),
    }
}

/// `params` with every key and value owned.
fn owned_params(params: &RawParams<'_>) -> RawParams<'static> {
    params
        .iter()
        .map(|(k, v)| (Cow::Owned((**k).to_owned()), Cow::Owned((**v).to_owned())))
        .collect()
}

#[derive(Deserialize)]
struct InputRequired {
    #[serde(rename = "inputRequests", default)]
    input_requests: Option<BTreeMap<String, InputRequest>>,
    #[serde(rename = "requestState", default)]
    request_state: Option<Box<RawValue>>,
}

#[derive(Deserialize)]
struct InputRequest {
    method: String,
    #[serde(default)]
    params: Option<Box<RawValue>>,
}
