package pgtest

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// Server is a PostgreSQL server, or a Citus cluster of a coordinator and
// workers, of one test's own, for the tests that stop or restart the
// database (the servers of DATABASE_URL and MCPSEARCH_CITUS_URL are shared
// by every test, and must never be restarted). Each server listens on a
// Unix socket in a folder of its own and on no TCP port, so that no port is
// picked or taken. They run the machine's PostgreSQL (the newest under
// /usr/lib/postgresql), with pgvector and, for a cluster, Citus installed
// for it, as scripts/pg.sh and scripts/citus.sh install them; run as root,
// the servers run as the user postgres. The test's end stops them and
// removes their folder.
type Server struct {
	// URL names the database "mcpsearch" of the server (of the
	// coordinator), as the superuser "mcpsearch": NewDatabase makes the
	// test's databases from it.
	URL string
	bin string
	// as is the user the servers run as; nil for the test's own.
	as *user.User
	// nodes are the servers' data folders, the coordinator's first; each
	// holds its server's socket.
	nodes []string
}

// serverPort is the port in the name of each server's socket: the servers
// listen on no TCP port, and each has its socket folder.
const serverPort = 5432

// StartServer starts a PostgreSQL server with pgvector of the test's own.
// The test is skipped when PostgreSQL's programs or pgvector are not
// installed on this machine.
func StartServer(t testing.TB) *Server {
	t.Helper()
	return startServers(t, 0)
}

// StartCitus starts a Citus cluster of the test's own: a coordinator and
// workers, with Citus and pgvector, the workers registered. Like the tests
// that use the shared cluster it needs MCPSEARCH_CITUS_URL (see
// CitusAdminURL; the cluster is not that one), and Citus installed on this
// machine: without, the test is skipped, or failed when
// MCPSEARCH_REQUIRE_CITUS=1.
func StartCitus(t testing.TB, workers int) *Server {
	t.Helper()
	CitusAdminURL(t)
	return startServers(t, max(workers, 1))
}

// EachServer runs f in parallel subtests, "postgres" on a PostgreSQL server
// of its own and "citus" on a Citus cluster of its own (one worker): the
// tests that stop and start their database run on both. When the suite
// itself runs on Citus (make test-citus: DATABASE_URL is
// MCPSEARCH_CITUS_URL), the "postgres" subtest is left to the suite's run
// on PostgreSQL, which has it.
func EachServer(t *testing.T, f func(t *testing.T, srv *Server)) {
	citusSuite := os.Getenv("MCPSEARCH_CITUS_URL") != "" && os.Getenv("DATABASE_URL") == os.Getenv("MCPSEARCH_CITUS_URL")
	for _, c := range []struct {
		name  string
		start func(testing.TB) *Server
	}{
		{"postgres", StartServer},
		{"citus", func(t testing.TB) *Server { return StartCitus(t, 1) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			if citusSuite && c.name == "postgres" {
				t.Skip("run by the suite on PostgreSQL (make test)")
			}
			t.Parallel()
			f(t, c.start(t))
		})
	}
}

func startServers(t testing.TB, workers int) *Server {
	t.Helper()
	bin, share := postgresInstall()
	missing := ""
	switch {
	case bin == "":
		missing = "PostgreSQL's programs (initdb, pg_ctl) are not installed under /usr/lib/postgresql"
	case !exists(filepath.Join(share, "extension", "vector.control")):
		missing = "pgvector is not installed for " + bin
	case workers > 0 && !exists(filepath.Join(share, "extension", "citus.control")):
		missing = "Citus is not installed for " + bin + " (scripts/citus.sh installs it)"
	}
	if missing != "" {
		if workers > 0 && os.Getenv(EnvRequireCitus) == "1" {
			t.Fatalf("pgtest: %s=1 but %s", EnvRequireCitus, missing)
		}
		t.Skipf("pgtest: a test that starts its own PostgreSQL: %s", missing)
	}
	s := &Server{bin: bin}
	if os.Geteuid() == 0 {
		// initdb refuses to run as root.
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Skipf("pgtest: running as root, a server of the test's own needs the user postgres: %v", err)
		}
		s.as = u
	}
	// Not t.TempDir: its parents are the test user's alone, and the
	// servers' user must reach the sockets.
	dir, err := os.MkdirTemp("", "mcpsearch-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := s.own(dir); err != nil {
		t.Fatal(err)
	}
	names := []string{"main"}
	if workers > 0 {
		names = []string{"coordinator"}
		for i := range workers {
			names = append(names, fmt.Sprintf("worker%d", i+1))
		}
	}
	for _, name := range names {
		node := filepath.Join(dir, name)
		s.nodes = append(s.nodes, node)
		if err := s.initNode(node, workers > 0); err != nil {
			t.Fatalf("pgtest: %v", err)
		}
		// Registered as each starts: a server started is stopped at the
		// end, whatever happens next.
		t.Cleanup(func() { _ = s.ctl(node, "stop", "-m", "immediate") })
		if err := s.ctl(node, "start", "-l", filepath.Join(node, "server.log"), "-t", "60"); err != nil {
			t.Fatalf("pgtest: start %s: %v", name, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	for _, node := range s.nodes {
		if err := execAdmin(ctx, nodeURL(node, "postgres"), "CREATE DATABASE mcpsearch"); err != nil {
			t.Fatalf("pgtest: %v", err)
		}
		if workers > 0 {
			if err := execAdmin(ctx, nodeURL(node, "mcpsearch"), "CREATE EXTENSION citus"); err != nil {
				t.Fatalf("pgtest: %v", err)
			}
		}
	}
	s.URL = nodeURL(s.nodes[0], "mcpsearch")
	if workers > 0 {
		conn, err := pgx.Connect(ctx, s.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(ctx, `SELECT citus_set_coordinator_host($1, $2)`, s.nodes[0], serverPort); err != nil {
			t.Fatalf("pgtest: register the coordinator: %v", err)
		}
		for _, w := range s.nodes[1:] {
			if _, err := conn.Exec(ctx, `SELECT citus_add_node($1, $2)`, w, serverPort); err != nil {
				t.Fatalf("pgtest: add worker %s: %v", w, err)
			}
		}
	}
	return s
}

// initNode makes the data folder of one server, set to listen on its
// socket only, with what a test needs and no more durability.
func (s *Server) initNode(node string, citus bool) error {
	if err := s.run("initdb", "-D", node, "-U", "mcpsearch", "--auth=trust", "--encoding=UTF8", "--locale=C.UTF-8"); err != nil {
		return err
	}
	conf := []string{
		"listen_addresses = ''",
		"unix_socket_directories = '" + node + "'",
		"port = " + strconv.Itoa(serverPort),
		"fsync = off",
		"synchronous_commit = off",
		"full_page_writes = off",
	}
	if citus {
		conf = append(conf,
			"shared_preload_libraries = 'citus'",
			// Where a node reaches itself.
			"citus.local_hostname = '"+node+"'",
			"citus.enable_statistics_collection = off",
			"max_connections = 200")
	}
	f, err := os.OpenFile(filepath.Join(node, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.WriteString("\n# a server of one test (internal/pgtest)\n" + strings.Join(conf, "\n") + "\n")
	return err
}

// NewDatabase returns the URL of a new database on the server with every
// migration applied (on a cluster, on every node), as NewDatabase does on
// DATABASE_URL's.
func (s *Server) NewDatabase(t testing.TB) string {
	t.Helper()
	return newDatabaseOn(t, s.URL)
}

// Restart restarts every server (pg_ctl restart, fast mode: the sessions
// are ended, as by a restart of the machine's database), the workers
// first, and returns once they all accept connections again.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	for _, node := range s.workersFirst() {
		if err := s.ctl(node, "restart", "-m", "fast", "-l", filepath.Join(node, "server.log"), "-t", "60"); err != nil {
			t.Fatalf("pgtest: restart %s: %v", filepath.Base(node), err)
		}
	}
}

// Stop stops every server (fast mode, as Restart does), the coordinator
// first, and returns once they are down: the first half of a restart
// whose second, Start, the test chooses the moment of.
func (s *Server) Stop(t testing.TB) {
	t.Helper()
	for _, node := range s.nodes {
		if err := s.ctl(node, "stop", "-m", "fast"); err != nil {
			t.Fatalf("pgtest: stop %s: %v", filepath.Base(node), err)
		}
	}
}

// Start starts the servers Stop stopped, the workers first, and returns
// once they all accept connections.
func (s *Server) Start(t testing.TB) {
	t.Helper()
	for _, node := range s.workersFirst() {
		if err := s.ctl(node, "start", "-l", filepath.Join(node, "server.log"), "-t", "60"); err != nil {
			t.Fatalf("pgtest: start %s: %v", filepath.Base(node), err)
		}
	}
}

// workersFirst returns the data folders, the coordinator's last.
func (s *Server) workersFirst() []string {
	nodes := slices.Clone(s.nodes)
	slices.Reverse(nodes)
	return nodes
}

// ctl runs pg_ctl on the server of node, waiting for the action to end.
func (s *Server) ctl(node, action string, args ...string) error {
	return s.run("pg_ctl", append([]string{"-D", node, "-w", action}, args...)...)
}

// run runs PostgreSQL's program prog as the servers' user.
func (s *Server) run(prog string, args ...string) error {
	path := filepath.Join(s.bin, prog)
	var cmd *exec.Cmd
	if s.as != nil {
		cmd = exec.Command("runuser", append([]string{"-u", s.as.Username, "--", path}, args...)...)
	} else {
		cmd = exec.Command(path, args...)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", prog, strings.Join(args, " "), err, out)
	}
	return nil
}

// own gives folder dir to the servers' user.
func (s *Server) own(dir string) error {
	if s.as == nil {
		return nil
	}
	uid, err := strconv.Atoi(s.as.Uid)
	if err != nil {
		return err
	}
	gid, err := strconv.Atoi(s.as.Gid)
	if err != nil {
		return err
	}
	return os.Chown(dir, uid, gid)
}

// nodeURL is the URL of database db on the server whose socket is in
// folder node.
func nodeURL(node, db string) string {
	q := url.Values{"host": {node}, "port": {strconv.Itoa(serverPort)}, "sslmode": {"disable"}}
	return (&url.URL{Scheme: "postgres", User: url.User("mcpsearch"), Path: "/" + db, RawQuery: q.Encode()}).String()
}

// postgresInstall returns the programs' folder and the share folder of the
// newest PostgreSQL installed as Debian installs it; "" when there is none.
func postgresInstall() (bin, share string) {
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	best := -1
	for _, initdb := range found {
		v, err := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(initdb))))
		if err != nil || v <= best {
			continue
		}
		best = v
		bin = filepath.Dir(initdb)
		share = filepath.Join("/usr/share/postgresql", strconv.Itoa(v))
	}
	return bin, share
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
