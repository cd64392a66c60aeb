package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mailroom/mailroom"
	"github.com/spf13/cobra"
)

func (m *Main) tokenCmd() *cobra.Command {
	var agent, human string
	create := &cobra.Command{
		Use:   "create (--agent NAME | --human LOGIN)",
		Short: "Register an identity and print a new bearer token for it",
		Long: `Register the identity (idempotent) and print a new bearer token for it as the
last line of stdout. The token is shown once: the database keeps only its
SHA-256 digest. Use it as 'Authorization: Bearer TOKEN' over HTTP, or as
MAILROOM_TOKEN for the mail commands with --url.`,
		Example: "  mailroom token create --agent alice\n  mailroom token create --human dana",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			fl := cmd.Flags()
			if fl.Changed("agent") == fl.Changed("human") || (agent == "" && human == "") {
				return errors.New("token create needs exactly one of --agent NAME or --human LOGIN")
			}
			name, kind := agent, mailroom.KindAgent
			if fl.Changed("human") {
				name, kind = human, mailroom.KindHuman
			}
			return m.action(func(ctx context.Context, _ []string) error { return m.tokenCreate(ctx, name, kind) })(cmd, args)
		},
	}
	create.Flags().StringVar(&agent, "agent", "", "the agent identity the token acts as")
	create.Flags().StringVar(&human, "human", "", "the human identity the token acts as")
	return group("token", "Manage bearer tokens for HTTP", create, m.tokenListCmd(), m.tokenRevokeCmd())
}

func (m *Main) tokenCreate(ctx context.Context, name string, kind mailroom.Kind) error {
	if err := m.open(ctx); err != nil {
		return err
	}
	id, err := m.store.AddIdentity(ctx, name, kind)
	if err != nil {
		return cliError(err)
	}
	token, digest := mailroom.NewToken()
	if err := m.store.AddToken(ctx, id.ID, digest); err != nil {
		return cliError(err)
	}
	fmt.Fprintf(m.stdout, "token for %s (shown once; the database keeps only its SHA-256 digest):\n%s\n", id.Address(), token)
	return nil
}

func (m *Main) identityCmd() *cobra.Command {
	var human bool
	add := &cobra.Command{
		Use:     "add NAME [--human]",
		Short:   "Register an agent (or, with --human, a human) identity; idempotent",
		Example: "  mailroom identity add bob\n  mailroom identity add dana --human",
		Args:    words("NAME"),
		RunE: m.action(func(ctx context.Context, args []string) error {
			kind := mailroom.KindAgent
			if human {
				kind = mailroom.KindHuman
			}
			return m.identityAdd(ctx, args[0], kind)
		}),
	}
	add.Flags().BoolVar(&human, "human", false, "register a human (human:NAME) rather than an agent (@NAME)")
	list := &cobra.Command{
		Use:   "list",
		Short: "List every identity with its kind, creation time and role grants",
		Args:  cobra.NoArgs,
		RunE:  m.action(func(ctx context.Context, _ []string) error { return m.identityList(ctx) }),
	}
	return group("identity", "Register and list identities (agents and humans)", add, list)
}

func (m *Main) identityAdd(ctx context.Context, name string, kind mailroom.Kind) error {
	if err := m.open(ctx); err != nil {
		return err
	}
	id, err := m.store.AddIdentity(ctx, name, kind)
	if err != nil {
		return cliError(err)
	}
	fmt.Fprintf(m.stdout, "identity %s\n", id.Address())
	return nil
}

func (m *Main) identityList(ctx context.Context) error {
	if err := m.open(ctx); err != nil {
		return err
	}
	ids, err := m.store.Identities(ctx)
	if err != nil {
		return cliError(err)
	}
	w := tabwriter.NewWriter(m.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "IDENTITY\tKIND\tCREATED\tROLES")
	for _, i := range ids {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", i.Address(), i.Kind, i.CreatedAt.UTC().Format(time.DateTime), orDash(strings.Join(i.Roles, ",")))
	}
	return w.Flush()
}

func (m *Main) roleCmd() *cobra.Command {
	grant := &cobra.Command{
		Use:     "grant NAME ROLE",
		Short:   "Grant a role queue to an identity: it then reads role:ROLE",
		Example: "  mailroom role grant bob reviewer",
		Args:    words("NAME", "ROLE"),
		RunE: m.action(func(ctx context.Context, args []string) error {
			return m.roleChange(ctx, args[0], args[1], true)
		}),
	}
	revoke := &cobra.Command{
		Use:     "revoke NAME ROLE",
		Short:   "Take a role queue away from an identity",
		Example: "  mailroom role revoke bob reviewer",
		Args:    words("NAME", "ROLE"),
		RunE: m.action(func(ctx context.Context, args []string) error {
			return m.roleChange(ctx, args[0], args[1], false)
		}),
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "List every role queue and who holds it (implicit next-session roles are not listed)",
		Args:  cobra.NoArgs,
		RunE:  m.action(func(ctx context.Context, _ []string) error { return m.roleList(ctx) }),
	}
	return group("role", "Grant, revoke and list role queues", grant, revoke, list)
}

func (m *Main) roleChange(ctx context.Context, name, role string, grant bool) error {
	if err := m.open(ctx); err != nil {
		return err
	}
	if ref, _, err := mailroom.ParseIdentityRef(name); err == nil && ref != "" {
		name = ref // @bob, AGENT:bob and human:dana name bob and dana
	}
	role = strings.TrimPrefix(role, "role:")
	if grant {
		if err := m.store.GrantRole(ctx, name, role); err != nil {
			return cliError(err)
		}
		fmt.Fprintf(m.stdout, "granted role:%s to %s\n", role, name)
		return nil
	}
	if err := m.store.RevokeRole(ctx, name, role); err != nil {
		return cliError(err)
	}
	fmt.Fprintf(m.stdout, "revoked role:%s from %s\n", role, name)
	return nil
}

func (m *Main) roleList(ctx context.Context) error {
	if err := m.open(ctx); err != nil {
		return err
	}
	roles, err := m.store.Roles(ctx)
	if err != nil {
		return cliError(err)
	}
	w := tabwriter.NewWriter(m.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ROLE\tHOLDERS")
	for _, r := range roles {
		fmt.Fprintf(w, "role:%s\t%s\n", r.Name, orDash(strings.Join(r.Holders, ",")))
	}
	return w.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
