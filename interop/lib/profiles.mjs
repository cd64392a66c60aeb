// Client profiles: how a client puts tool arguments on the wire.
//
// native       the well-behaved control: arrays are sent as JSON arrays.
// stringified  what the failing harnesses do: an argument that the tool's
//              inputSchema declares as an array (type array, or an anyOf/oneOf
//              branch of type array) is sent as JSON.stringify(value).
//
// The stringified profile only stringifies where mailroom's contract accepts a
// stringified array (SPEC section 5: mark_read's messageId, a string that
// parses as a JSON array of strings that all start with "MESSAGE:"). For every
// other array argument the contract gives a string its own meaning (`to` takes
// "one address or an array", so "[\"@bob\"]" is one, unknown, address) and a
// stringified array there is a different request, not the same request badly
// encoded. Extend STRINGIFIED_ACCEPTED when the server's contract grows; the
// "stringified-array probe" test in scenario.mjs reports what the server does
// with every other declared array argument. See interop/README.md.

export const STRINGIFIED_ACCEPTED = {
  mark_read: ['messageId'],
};

function isArraySchema(s) {
  if (!s || typeof s !== 'object') return false;
  if (s.type === 'array' || (Array.isArray(s.type) && s.type.includes('array'))) return true;
  for (const key of ['anyOf', 'oneOf']) {
    if (Array.isArray(s[key]) && s[key].some(isArraySchema)) return true;
  }
  return false;
}

// Names of the properties an inputSchema declares as arrays (directly or in an
// anyOf / oneOf branch).
export function declaredArrayArgs(inputSchema) {
  const props = inputSchema?.properties ?? {};
  return Object.keys(props).filter((k) => isArraySchema(props[k]));
}

export function makeProfile(name) {
  if (name === 'native') {
    return { name, stats: { stringified: 0 }, transform: (_tool, args) => args };
  }
  if (name === 'stringified') {
    const stats = { stringified: 0, byArg: {} };
    return {
      name,
      stats,
      transform(tool, args, inputSchema) {
        if (!args || typeof args !== 'object') return args;
        const declared = new Set(declaredArrayArgs(inputSchema));
        const accepted = new Set(STRINGIFIED_ACCEPTED[tool] ?? []);
        const out = {};
        for (const [k, v] of Object.entries(args)) {
          if (Array.isArray(v) && declared.has(k) && accepted.has(k)) {
            out[k] = JSON.stringify(v);
            stats.stringified++;
            stats.byArg[`${tool}.${k}`] = (stats.byArg[`${tool}.${k}`] ?? 0) + 1;
          } else {
            out[k] = v;
          }
        }
        return out;
      },
    };
  }
  throw new Error(`unknown client profile ${name} (native, stringified)`);
}
