// The SPEC section 5 scenario over every transport and client profile.
// Select with INTEROP_TRANSPORTS=stdio,http and INTEROP_PROFILES=native,stringified.
import { profilesFromEnv, transportsFromEnv } from '../lib/harness.mjs';
import { scenario } from '../lib/scenario.mjs';

for (const transport of transportsFromEnv()) {
  for (const profile of profilesFromEnv()) {
    scenario(transport, profile);
  }
}
