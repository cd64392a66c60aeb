package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mailroom/mailroom"
	"github.com/mailroom/mailroom/concepts"
	"github.com/spf13/cobra"
)

// conceptTerms lets a retraction take back the document frequencies its
// message contributed (sqlite.Options.Terms).
func conceptTerms(subject, body string) []string {
	return concepts.Terms(concepts.Document{Subject: subject, Body: body})
}

// readGrantCmds are `grant read-inbox` and `revoke read-inbox`.
func (m *Main) readGrantCmds() []*cobra.Command {
	grant := &cobra.Command{
		Use:   "read-inbox GRANTEE OWNER",
		Short: "Let GRANTEE read OWNER's inbox, read-only (list_messages/get_message with of)",
		Long: `Let GRANTEE read OWNER's inbox with list_messages({of: OWNER}) and
get_message({messageId, of: OWNER}): read-only, seeing OWNER's read state and
changing nothing. Idempotent. GRANTEE and OWNER are @name, human:login or a
bare name.`,
		Example: "  mailroom grant read-inbox human:dana @alice",
		Args:    words("GRANTEE", "OWNER"),
		RunE:    m.action(func(ctx context.Context, args []string) error { return m.readGrant(ctx, true, args[0], args[1]) }),
	}
	revoke := &cobra.Command{
		Use:     "read-inbox GRANTEE OWNER",
		Short:   "Take back GRANTEE's read grant on OWNER's inbox",
		Example: "  mailroom revoke read-inbox human:dana @alice",
		Args:    words("GRANTEE", "OWNER"),
		RunE:    m.action(func(ctx context.Context, args []string) error { return m.readGrant(ctx, false, args[0], args[1]) }),
	}
	return []*cobra.Command{
		group("grant", "Grant read delegation", grant),
		group("revoke", "Revoke read delegation", revoke),
	}
}

func (m *Main) readGrant(ctx context.Context, grant bool, grantee, owner string) error {
	if err := m.open(ctx); err != nil {
		return err
	}
	if grant {
		if err := m.store.GrantReadInbox(ctx, grantee, owner); err != nil {
			return cliError(err)
		}
		fmt.Fprintf(m.stdout, "%s may now read the inbox of %s (read-only)\n", grantee, owner)
		return nil
	}
	found, err := m.store.RevokeReadInbox(ctx, grantee, owner)
	if err != nil {
		return cliError(err)
	}
	if !found {
		fmt.Fprintf(m.stdout, "%s had no read grant on %s; nothing changed\n", grantee, owner)
		return nil
	}
	fmt.Fprintf(m.stdout, "%s may no longer read the inbox of %s\n", grantee, owner)
	return nil
}

func (m *Main) purgeCmd() *cobra.Command {
	var olderThan string
	var dryRun, includeUnread bool
	c := &cobra.Command{
		Use:   "purge --older-than AGE [--dry-run] [--include-unread]",
		Short: "Remove old mail for good, with its edges, index entries and concept tags",
		Long: `Remove messages sent more than AGE ago (90d, 2w, 12h) whose every delivery
is read or archived, with their edges, full-text index entries and concept
tags, and print what was removed. --dry-run prints what would be removed;
--include-unread removes old unread mail too.`,
		Example: "  mailroom purge --older-than 90d --dry-run\n  mailroom purge --older-than 90d",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if olderThan == "" {
				return errors.New("purge needs --older-than AGE (e.g. 90d, 2w, 12h)")
			}
			age, err := mailroom.ParseAge(olderThan)
			if err != nil {
				return err
			}
			return m.action(func(ctx context.Context, _ []string) error {
				return m.purge(ctx, mailroom.PurgeRequest{Before: time.Now().Add(-age), DryRun: dryRun, IncludeUnread: includeUnread})
			})(cmd, args)
		},
	}
	c.Flags().StringVar(&olderThan, "older-than", "", "remove mail sent more than this long ago: 90d, 2w, 12h")
	c.Flags().BoolVar(&dryRun, "dry-run", false, "print what would be removed, remove nothing")
	c.Flags().BoolVar(&includeUnread, "include-unread", false, "also remove old mail that someone has not read")
	return c
}

func (m *Main) purge(ctx context.Context, r mailroom.PurgeRequest) error {
	if err := m.open(ctx); err != nil {
		return err
	}
	rep, err := m.store.Purge(ctx, r)
	if err != nil {
		return cliError(err)
	}
	fmt.Fprintln(m.stdout, rep)
	return nil
}
