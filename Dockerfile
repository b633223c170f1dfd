# syntax=docker/dockerfile:1
#
# The `datum` command as an image: controller worker, node agent and operator CLI in one.
#
#   docker build -t datum:0.1.0 .
#   docker run --rm datum:0.1.0 --help
#   docker run --rm -e TEMPORAL_ADDRESS=… -v "$PWD/fleet:/fleet:ro" datum:0.1.0 worker --fleet /fleet
#
# Stages: `build` compiles src/ to dist/ with every dependency installed; `prod-deps` installs
# the production dependencies only; the final stage is node + prod deps + dist/ (with the
# prebuilt workflow bundle) + bin/ + examples/, running as the unprivileged `node` user.
# docker-compose.yml builds it. Metrics (when DATUM_METRICS_ADDRESS is set): 9464 for a
# controller worker, 9465 for an agent, by convention.

# The Node.js the image runs on: 24, the Active LTS line (supported until April 2028; Node 20
# reached end of life in April 2026, and 22 is in maintenance until April 2027), pinned to a full
# version so a rebuild never moves the runtime. Debian bookworm-slim: glibc, so the prebuilt
# native addons of @swc/core and @temporalio/core-bridge load as they do on a developer's
# machine (better-sqlite3 is compiled for this Node in prod-deps). Bump deliberately.
ARG NODE_IMAGE=node:24.21.0-bookworm-slim

FROM ${NODE_IMAGE} AS base
WORKDIR /app
ENV npm_config_update_notifier=false \
    npm_config_fund=false \
    npm_config_audit=false

# ── build: npm ci + node scripts/build.mjs → dist/ ─────────────────────────────────────────
FROM base AS build
COPY package.json package-lock.json ./
# Compiling needs TypeScript and type packages only: no dependency's install script has to run.
RUN npm ci --ignore-scripts
COPY tsconfig.json tsconfig.build.json ./
COPY scripts/ ./scripts/
COPY src/ ./src/
RUN node scripts/build.mjs --force && test -f dist/src/cli/main.js
# The controller's workflow code, bundled once here rather than by webpack at every worker start
# (src/worker/bundle.ts), with and without the tracing interceptor (workflow-bundle.traced.js);
# the runtime stage points DATUM_WORKFLOW_BUNDLE at the first, and a worker that traces loads the other.
RUN node scripts/bundle-workflows.mjs dist/workflow-bundle.js

# ── prod-deps: production dependencies; install scripts only where package.json allows ────
FROM base AS prod-deps
# A compiler for the rare native addon without a prebuilt binary for this platform
# (better-sqlite3 falls back to node-gyp); this stage is discarded, the final image has none.
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 make g++ \
 && rm -rf /var/lib/apt/lists/*
# node-gyp builds against the headers that ship in this image instead of downloading them.
ENV npm_config_nodedir=/usr/local
COPY package.json package-lock.json ./
# package.json "allowScripts" lists the dependencies whose install scripts may run. The npm
# bundled with Node does not know that field, so apply it here: install with every script
# off, then rebuild (which runs preinstall/install/postinstall) exactly the allowed packages
# that the production tree contains. A dependency added later with an unreviewed install
# script therefore does not run it until it is added to allowScripts.
RUN npm ci --omit=dev --ignore-scripts \
 && node -e ' \
      const fs = require("node:fs"); \
      const allow = require("./package.json").allowScripts ?? {}; \
      for (const [spec, allowed] of Object.entries(allow)) { \
        const name = spec.replace(/(.)@.*$/, "$1"); \
        if (allowed === true && fs.existsSync(`node_modules/${name}/package.json`)) console.log(name); \
      }' > /tmp/allowed-scripts \
 && echo "running install scripts of: $(tr '\n' ' ' < /tmp/allowed-scripts)" \
 && if [ -s /tmp/allowed-scripts ]; then xargs npm rebuild < /tmp/allowed-scripts; fi \
 && npm cache clean --force

# ── runtime ────────────────────────────────────────────────────────────────────────────────
FROM base AS runtime
LABEL org.opencontainers.image.title="datum" \
      org.opencontainers.image.description="Keeps every node of a fleet at its declared desired state and proves it, on Temporal." \
      org.opencontainers.image.version="0.1.0"
# git: the controller records the commit of a desired-state file as its provenance when the
# fleet directory is a git checkout (without git it records the file's sha256 instead). The
# checkout is a read-only mount owned by another uid, which git refuses by default as
# "dubious ownership"; the container only ever reads it.
RUN apt-get update \
 && apt-get install -y --no-install-recommends git ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && git config --system --add safe.directory '*' \
 && mkdir -p /var/lib/datum /etc/datum /fleet \
 && chown node:node /var/lib/datum
ENV NODE_ENV=production \
    DATUM_WORKFLOW_BUNDLE=/app/dist/workflow-bundle.js
# Owned by root and read-only to the `node` user that runs Datum.
COPY package.json package-lock.json ./
COPY --from=prod-deps /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY bin/ ./bin/
COPY examples/ ./examples/
USER node
# /var/lib/datum holds agents' node roots: mount a volume there (docker-compose.yml does). No
# VOLUME instruction, which would give every container, controllers too, an anonymous volume.
EXPOSE 9464 9465
ENTRYPOINT ["node", "/app/bin/datum.js"]
CMD ["--help"]
