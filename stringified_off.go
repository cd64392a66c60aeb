//go:build mailroom_nostringified

package mailroom

const stringifiedIDsEnabled = false
