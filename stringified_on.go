//go:build !mailroom_nostringified

package mailroom

// stringifiedIDsEnabled is false only in the gate-check build (tag
// mailroom_nostringified), which proves the interop suite catches the loss of
// the compatibility rule.
const stringifiedIDsEnabled = true
