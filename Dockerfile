# syntax=docker/dockerfile:1
# Junction's image: a release build of the `junction` binary on a distroless
# runtime (glibc + libgcc, no shell, no package manager), running as uid 65532.
#   docker build -t junction:0.1.0 .
#   docker run --rm -p 8080:8080 junction:0.1.0          # the two built-in demo upstreams
#   docker run --rm -v $PWD/my.yaml:/etc/junction/gateway.yaml:ro -p 8080:8080 junction:0.1.0
# The Helm chart (helm/junction) mounts its ConfigMap over /etc/junction.

ARG RUST_IMAGE=rust:1.95-bookworm
ARG RUNTIME_IMAGE=gcr.io/distroless/cc-debian12:nonroot

FROM ${RUST_IMAGE} AS build
WORKDIR /src
# rust-toolchain.toml is left out by .dockerignore: the builder image is the
# pinned toolchain, and rustup must not try to download components.
COPY . .
# Cache mounts keep the registry and target/ between builds; the binary is
# copied out because the target/ cache is not part of the layer.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p junction --bin junction \
 && install -D -m 0755 target/release/junction /out/usr/local/bin/junction
# The repository's gateway.yaml, listening on all interfaces inside the
# container, and checked by the binary that will read it.
RUN sed -e 's#^  listen: 127\.0\.0\.1:8080#  listen: 0.0.0.0:8080#' \
        -e 's#^  public_url: http://127\.0\.0\.1:8080#  public_url: http://localhost:8080#' \
        gateway.yaml >/tmp/gateway.yaml \
 && grep -q '^  listen: 0\.0\.0\.0:8080' /tmp/gateway.yaml \
 && /out/usr/local/bin/junction validate --config /tmp/gateway.yaml \
 && install -D -m 0644 /tmp/gateway.yaml /out/etc/junction/gateway.yaml

FROM ${RUNTIME_IMAGE}
LABEL org.opencontainers.image.title="junction" \
      org.opencontainers.image.description="MCP gateway: one endpoint in front of many MCP servers" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /out/ /
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["junction"]
CMD ["run", "--config", "/etc/junction/gateway.yaml"]
