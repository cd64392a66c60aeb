//go:build !race

package mcp

const raceScale = 1
