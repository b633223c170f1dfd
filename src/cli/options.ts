/*
 * Option sets several commands share: the Temporal connection flags, the output format, a
 * timeout. Loads commander's types and nothing else, like program.ts.
 */
import { Option } from '@commander-js/extra-typings';
import type { Command, OptionValues } from '@commander-js/extra-typings';

const CONNECTION = 'Temporal connection (flags win over the environment, which wins over the profile):';

/** The `temporal` CLI's connection flags, on top of envconfig. */
export function connection<A extends unknown[], O extends OptionValues, G extends OptionValues>(command: Command<A, O, G>) {
  return command
    .addOption(
      new Option('--address <host:port>', 'Temporal frontend (env: TEMPORAL_ADDRESS; default localhost:7233)').helpGroup(
        CONNECTION,
      ),
    )
    .addOption(
      new Option('-n, --namespace <namespace>', 'namespace (env: TEMPORAL_NAMESPACE; default "default")').helpGroup(CONNECTION),
    )
    .addOption(new Option('--profile <name>', 'profile of the envconfig file (env: TEMPORAL_PROFILE)').helpGroup(CONNECTION))
    .addOption(
      new Option(
        '--config-file <path>',
        'envconfig TOML file (env: TEMPORAL_CONFIG_FILE; default ~/.config/temporalio/temporal.toml)',
      ).helpGroup(CONNECTION),
    )
    .addOption(
      new Option('--api-key <key>', 'API key, for Temporal Cloud (env: TEMPORAL_API_KEY; turns TLS on)').helpGroup(CONNECTION),
    )
    .addOption(new Option('--tls', 'connect with TLS (env: TEMPORAL_TLS)').helpGroup(CONNECTION))
    .addOption(
      new Option('--tls-cert-path <path>', 'client certificate (env: TEMPORAL_TLS_CLIENT_CERT_PATH)').helpGroup(CONNECTION),
    )
    .addOption(
      new Option('--tls-key-path <path>', 'client private key (env: TEMPORAL_TLS_CLIENT_KEY_PATH)').helpGroup(CONNECTION),
    )
    .addOption(
      new Option('--tls-ca-path <path>', 'server CA certificate (env: TEMPORAL_TLS_SERVER_CA_CERT_PATH)').helpGroup(CONNECTION),
    )
    .addOption(
      new Option('--tls-server-name <name>', 'server name to verify (env: TEMPORAL_TLS_SERVER_NAME)').helpGroup(CONNECTION),
    );
}

/** `-o text|json|jsonl` on every reading command, `--json` kept as the alias of `-o json`. */
export function output<A extends unknown[], O extends OptionValues, G extends OptionValues>(command: Command<A, O, G>) {
  return command
    .addOption(
      new Option('-o, --output <format>', 'text (default), json (one document) or jsonl (one object a line)').choices([
        'text',
        'json',
        'jsonl',
      ] as const),
    )
    .addOption(new Option('--json', 'same as -o json'));
}

export const timeoutOption = (what: string) =>
  new Option('--timeout <duration>', `how long to wait for ${what}, such as 90s or 10m`);
