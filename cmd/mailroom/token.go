package main

import (
	"context"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/mailroom/mailroom"
	"github.com/spf13/cobra"
)

func (m *Main) tokenListCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List bearer tokens: id, identity, created, last used (never the secret)",
		Long: `List every bearer token: its id (the first hex digits of the token's SHA-256
digest, which reveal nothing of the token), the identity it acts as, when it
was created and when it was last used over HTTP (recorded at most once a
minute). The secret itself is not stored and cannot be shown.`,
		Args: cobra.NoArgs,
		RunE: m.action(func(ctx context.Context, _ []string) error { return m.tokenList(ctx) }),
	}
}

func (m *Main) tokenList(ctx context.Context) error {
	if err := m.open(ctx); err != nil {
		return err
	}
	list, err := m.store.Tokens(ctx)
	if err != nil {
		return cliError(err)
	}
	w := tabwriter.NewWriter(m.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tIDENTITY\tCREATED\tLAST USED")
	for _, t := range list {
		used := "never"
		if t.LastUsedAt != nil {
			used = t.LastUsedAt.UTC().Format(time.DateTime)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", t.ID, t.Identity.Address(), t.CreatedAt.UTC().Format(time.DateTime), used)
	}
	return w.Flush()
}

func (m *Main) tokenRevokeCmd() *cobra.Command {
	var agent, human string
	c := &cobra.Command{
		Use:   "revoke (--agent NAME | --human LOGIN | ID-PREFIX)",
		Short: "Revoke bearer tokens: every token of an identity, or one by its id",
		Long: `Revoke bearer tokens, effective at once: the next request with a revoked
token gets 401, on open MCP sessions too, and event streams it opened close.
--agent NAME or --human LOGIN revokes every token of that identity; an
ID-PREFIX (at least 4 hex digits of an id from 'mailroom token list', or the
whole token) revokes the one token it names. A prefix that names several
tokens revokes nothing.`,
		Example: "  mailroom token revoke --agent alice\n  mailroom token revoke 3f9a1c",
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			fl := cmd.Flags()
			given := len(args)
			for _, f := range []string{"agent", "human"} {
				if fl.Changed(f) {
					given++
				}
			}
			if given != 1 {
				return errors.New("token revoke needs exactly one of --agent NAME, --human LOGIN or an ID-PREFIX")
			}
			var sel mailroom.TokenSelector
			switch {
			case fl.Changed("agent"):
				sel = mailroom.TokenSelector{Name: agent, Kind: mailroom.KindAgent}
			case fl.Changed("human"):
				sel = mailroom.TokenSelector{Name: human, Kind: mailroom.KindHuman}
			default:
				p, err := mailroom.ParseTokenPrefix(args[0])
				if err != nil {
					return err
				}
				sel.Prefix = p
			}
			return m.action(func(ctx context.Context, _ []string) error { return m.tokenRevoke(ctx, sel) })(cmd, args)
		},
	}
	c.Flags().StringVar(&agent, "agent", "", "revoke every token of this agent")
	c.Flags().StringVar(&human, "human", "", "revoke every token of this human")
	return c
}

func (m *Main) tokenRevoke(ctx context.Context, sel mailroom.TokenSelector) error {
	if err := m.open(ctx); err != nil {
		return err
	}
	gone, err := m.store.RevokeTokens(ctx, sel)
	if err != nil {
		return cliError(err)
	}
	for _, t := range gone {
		fmt.Fprintf(m.stdout, "revoked token %s of %s\n", t.ID, t.Identity.Address())
	}
	return nil
}
