# agent-exec, the daemon, in a small runtime image.
#
#   docker build -t agent-exec .
#   docker run --rm agent-exec doctor
#
# The commands an agent asks for run in this container's filesystem, so the
# runtime stage is where the tools they need go (git, a compiler, python):
# extend it with `FROM agent-exec` and install them. docs/deploy.md says
# which capabilities and security options the sandbox needs at run time.

# ---- build ---------------------------------------------------------------
FROM rust:1-slim-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY crates crates
COPY src src
COPY benches benches
COPY examples examples
RUN cargo build --release --locked --bin agent-exec --bin agent-exec-client \
 && strip target/release/agent-exec target/release/agent-exec-client

# ---- runtime ---------------------------------------------------------------
FROM debian:bookworm-slim
# The shell and coreutils the shipped policies expect; git and ripgrep for
# a coding agent; nothing else.
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates git ripgrep \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 990 agent-exec \
 && install -d -m 0755 /etc/agent-exec /run/agent-exec /workspace \
 && install -d -m 0700 /var/lib/agent-exec
COPY --from=build /src/target/release/agent-exec /usr/local/bin/agent-exec
COPY --from=build /src/target/release/agent-exec-client /usr/local/bin/agent-exec-client
COPY policies /etc/agent-exec/policies
COPY docs/man /usr/local/share/man/man1
COPY completions/agent-exec.bash /usr/share/bash-completion/completions/agent-exec
# The supervisor runs as root inside the container: it switches each
# command to the project owner's uid and needs CAP_SYS_ADMIN for the
# per-run namespaces. Commands never keep root.
USER root
WORKDIR /workspace
ENTRYPOINT ["agent-exec"]
CMD ["serve", "--policy", "/etc/agent-exec/policies/code.toml", "--root", "/workspace", "--socket", "/run/agent-exec/agent-exec.sock", "--state", "/var/lib/agent-exec/state"]
