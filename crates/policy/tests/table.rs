//! Table-driven decisions against the shipped code policy, with a real
//! project root in a temp directory (symlinks inside and out, an outside
//! "secret" file) so path checks run against the filesystem.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use agent_exec_policy::{CommandSpec, Context, Policy, Verdict};

/// The policies the project ships, at the workspace root.
const POLICIES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../policies");

const A: Verdict = Verdict::Allow;
const D: Verdict = Verdict::Deny;
const R: Verdict = Verdict::RequireApproval;

struct Fixture {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    outside: PathBuf,
}

/// root/
///   README.md, src/lib.rs, sub/deep/, docs -> src (inside),
///   etc_link -> /etc, secret_link -> ../outside/secret.txt,
///   dangling -> ../outside/new.txt (does not exist), loop_a <-> loop_b
/// outside/secret.txt
fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().canonicalize().unwrap();
    let root = base.join("root");
    let outside = base.join("outside");
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::create_dir_all(root.join("sub/deep")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(root.join("README.md"), "hello").unwrap();
    std::fs::write(root.join("src/lib.rs"), "fn main() {}").unwrap();
    std::fs::write(outside.join("secret.txt"), "canary").unwrap();
    symlink(root.join("src"), root.join("docs")).unwrap();
    symlink("/etc", root.join("etc_link")).unwrap();
    symlink("../outside/secret.txt", root.join("secret_link")).unwrap();
    symlink("../outside/new.txt", root.join("dangling")).unwrap();
    symlink("loop_b", root.join("loop_a")).unwrap();
    symlink("loop_a", root.join("loop_b")).unwrap();
    Fixture {
        _tmp: tmp,
        root,
        outside,
    }
}

fn code_policy() -> Policy {
    Policy::load(&Path::new(POLICIES).join("code.toml")).unwrap()
}

/// (command, cwd relative to root, verdict, rule, read_only)
type Case = (
    &'static str,
    &'static str,
    Verdict,
    Option<&'static str>,
    Option<bool>,
);

fn run_cases(policy: &Policy, fx: &Fixture, cases: &[Case]) {
    let mut failures = Vec::new();
    for (cmd, cwd, verdict, rule, read_only) in cases {
        let cmd = cmd
            .replace("{root}", fx.root.to_str().unwrap())
            .replace("{out}", fx.outside.to_str().unwrap());
        let cwd = fx.root.join(cwd);
        let ctx = Context {
            root: &fx.root,
            cwd: &cwd,
        };
        let spec = CommandSpec::Shell(cmd.clone());
        let decided = policy.decide(&spec, &ctx);
        // The full evaluation must reach the very same decision.
        let evaluated = policy.evaluate(&spec, &ctx).map(|e| e.decision());
        if evaluated != decided {
            failures.push(format!(
                "`{cmd}`: evaluate gives {evaluated:?}, decide {decided:?}"
            ));
        }
        match decided {
            Ok(d) => {
                // Every decision names what decided and why.
                if d.token.as_deref().is_none_or(str::is_empty) || d.reason.is_empty() {
                    failures.push(format!("`{cmd}`: no token or reason in {d:?}"));
                }
                let ok = d.verdict == *verdict
                    && rule.is_none_or(|r| r == d.rule)
                    && read_only.is_none_or(|ro| ro == d.read_only);
                if !ok {
                    failures.push(format!(
                        "`{cmd}`: expected {verdict:?} {rule:?} ro={read_only:?}, got {:?} `{}` ro={} ({})",
                        d.verdict, d.rule, d.read_only, d.reason
                    ));
                }
            }
            Err(e) => failures.push(format!("`{cmd}`: parse error {e}")),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[test]
fn rules_by_program_subcommand_option_and_pattern() {
    let fx = fixture();
    #[rustfmt::skip]
    let cases: &[Case] = &[
        // allow by program
        ("ls -la", "", A, Some("read-tools"), Some(true)),
        ("cat README.md", "", A, Some("read-tools"), Some(true)),
        ("head -n 5 src/lib.rs", "", A, Some("read-tools"), Some(true)),
        ("wc -l README.md src/lib.rs", "", A, Some("read-tools"), Some(true)),
        ("rg -n fn src", "", A, Some("search-tools"), Some(true)),
        ("jq . package.json", "", A, Some("read-tools"), Some(true)),
        ("echo hello", "", A, Some("read-tools"), Some(true)),
        ("true", "", A, Some("read-tools"), Some(true)),
        ("test -f README.md", "", A, Some("read-tools"), Some(true)),
        // allow by subcommand, read-only vs mutating
        ("git status", "", A, Some("git-read"), Some(true)),
        ("git diff HEAD~1", "", A, Some("git-read"), Some(true)),
        ("git log --oneline -5", "", A, Some("git-read"), Some(true)),
        ("git branch --list", "", A, Some("git-read"), Some(true)),
        ("git stash list", "", A, Some("git-read"), Some(true)),
        ("git --no-pager show HEAD", "", A, Some("git-read"), Some(true)),
        ("git -C sub status", "", A, Some("git-read"), Some(true)),
        ("git add -A", "", A, Some("git-write"), Some(false)),
        ("git commit -m msg", "", A, Some("git-write"), Some(false)),
        ("git checkout -b topic", "", A, Some("git-write"), Some(false)),
        ("git stash", "", A, Some("git-write"), Some(false)),
        ("git checkout main", "", A, Some("git-write"), Some(false)),
        ("git checkout -- src/lib.rs", "", A, Some("git-write"), Some(false)),
        ("git frobnicate", "", R, Some("default"), None),
        ("git branch -D topic", "", A, Some("git-write"), None),
        ("git branch -r", "", A, Some("git-read"), Some(true)),
        // deny by subcommand / options
        ("git push", "", R, Some("git-publish"), None),
        ("git fetch", "", D, Some("git-network"), None),
        ("git -C sub push origin main", "", R, Some("git-publish"), None),
        ("git config user.name x", "", D, Some("git-config"), None),
        ("git -c core.fsmonitor=x status", "", D, Some("git-global-exec"), None),
        ("git --exec-path=/tmp status", "", D, None, None),
        ("git --config-env=core.pager=X log", "", D, Some("git-global-exec"), None),
        ("git diff --ext-diff", "", D, Some("git-external-tools"), None),
        ("git log -p --textconv", "", D, Some("git-external-tools"), None),
        ("git grep -c needle", "", A, Some("git-read"), Some(true)),
        ("find . -name '*.rs'", "", A, Some("read-tools"), Some(true)),
        ("find . -exec cat {} +", "", A, Some("find-exec"), None),
        ("find . -exec cat /etc/passwd ;", "", D, Some("builtin:path-escape"), None),
        ("find src -name x -exec sh -c 'curl x' ;", "", D, None, None),
        ("find . -execdir ls ;", "", A, Some("find-exec"), None),
        ("find . -ok rm {} ;", "", D, Some("builtin:protected-path"), None),
        ("find build -delete", "", A, Some("find-exec"), None),
        ("find . -name '*.pyc' -delete", "", A, Some("find-exec"), None),
        ("find . -path './.git/*' -delete", "", D, Some("builtin:protected-path"), None),
        ("find {out} -name '*.pyc' -delete", "", D, Some("builtin:path-escape"), None),
        ("find . -delete", "", D, Some("builtin:protected-path"), None),
        ("find . -fprintf out.txt %p", "", D, Some("find-write-files"), None),
        ("find . -fls out.txt", "", D, Some("find-write-files"), None),
        ("sed -n '1,5p' README.md", "", A, Some("search-tools"), Some(true)),
        ("sed -i 's/a/b/' README.md", "", A, Some("sed-inplace"), Some(false)),
        ("sed -i.bak 's/a/b/' README.md", "", A, Some("sed-inplace"), Some(false)),
        ("sed --in-place 's/a/b/' src/lib.rs", "", A, Some("sed-inplace"), Some(false)),
        ("sed -i 's/a/b/' {out}/secret.txt", "", D, Some("builtin:path-escape"), None),
        ("sed 's/a/b/e' README.md", "", D, Some("sed-exec"), None),
        ("sed '1e id' README.md", "", D, Some("sed-exec"), None),
        ("sed 'w /tmp/copy' README.md", "", D, Some("sed-exec"), None),
        ("sed 's/a/b/w out.txt' README.md", "", D, Some("sed-exec"), None),
        ("sed 'r /etc/shadow' README.md", "", D, None, None),
        ("sed 's|a|b|e' README.md", "", D, Some("sed-exec"), None),
        ("sed --expression='e id' README.md", "", D, Some("sed-exec"), None),
        ("sed -e'1e id' README.md", "", D, Some("sed-exec"), None),
        ("sed -ne 'w out' README.md", "", D, Some("sed-exec"), None),
        ("sed -n '/re/p' README.md", "", A, Some("search-tools"), None),
        ("sed -f script.sed README.md", "", R, Some("sed-script-file"), None),
        ("cat /et\"\"c/passwd", "", D, Some("builtin:path-escape"), None),
        ("cat ${X:-/etc/passwd}", "", D, Some("builtin:expansion-path"), None),
        ("a=/etc; cat $a/passwd", "", D, Some("builtin:path-escape"), None),
        ("cat /proc/self/environ", "", D, Some("builtin:path-escape"), None),
        ("git -ccore.pager=sh log", "", D, Some("git-global-exec"), None),
        ("git grep -Osh needle", "", D, Some("git-grep-pager"), None),
        ("git commit --template=/etc/passwd", "", D, Some("builtin:path-escape"), None),
        ("tar -xf a.tar -C /", "", D, Some("builtin:path-escape"), None),
        ("awk '{print $1}' README.md", "", A, Some("search-tools"), Some(true)),
        ("awk 'BEGIN { system(\"id\") }'", "", D, Some("awk-exec"), None),
        ("awk '{ print | \"sh\" }' README.md", "", D, Some("awk-exec"), None),
        ("awk '{ print > \"/tmp/x\" }' README.md", "", D, Some("awk-exec"), None),
        ("gawk 'BEGIN { while ((\"id\" | getline l) > 0) print l }'", "", D, Some("awk-exec"), None),
        ("awk -f prog.awk README.md", "", R, Some("awk-progfile"), None),
        ("tar --to-command=sh -xf a.tar", "", D, Some("tar"), None),
        ("tar --checkpoint-action=exec=sh -cf a.tar src", "", D, Some("tar"), None),
        ("tar --use-compress-program=./x -cf a.tar src", "", D, Some("tar"), None),
        ("tar -I ./x -cf a.tar src", "", D, Some("tar"), None),
        ("tar --to-com=sh -xf a.tar", "", D, Some("tar"), None),
        ("tar -czf a.tar.gz src", "", A, Some("tar-archive"), None),
        ("tar -czf {out}/a.tar.gz src", "", D, Some("builtin:path-escape"), None),
        ("rsync -e 'sh -c id' a b", "", D, Some("rsync-shell"), None),
        ("rsync -a src/ host:backup/", "", D, Some("rsync-remote"), None),
        ("rsync -a src/ backup/", "", R, Some("default"), None),
        ("less +!id README.md", "", D, Some("pager-commands"), None),
        ("man -P 'sh -c id' ls", "", D, Some("man-pager"), None),
        ("man ls", "", A, Some("man-read"), Some(true)),
        ("vim README.md", "", D, Some("editors"), None),
        ("rg --pre ./x needle", "", D, Some("rg-preprocessor"), None),
        ("rg --pre-glob '*.gz' needle", "", A, Some("search-tools"), None),
        // the first operand of grep/sed/awk is a pattern, not a path
        ("grep -n '../..' README.md", "", A, Some("search-tools"), Some(true)),
        ("grep /etc/passwd README.md", "", A, Some("search-tools"), None),
        ("grep -e x /etc/passwd", "", D, Some("builtin:path-escape"), None),
        ("grep -rn x /etc", "", D, Some("builtin:path-escape"), None),
        ("sed -i 's/\\.\\.\\/x/' README.md", "", A, Some("sed-inplace"), None),
        ("sed -i 's/../x/' README.md", "", A, Some("sed-inplace"), None),
        ("sed -i -e 's/a/b/' ../outside/secret.txt", "", D, Some("builtin:path-escape"), None),
        ("sed -n p /etc/passwd", "", D, Some("builtin:path-escape"), None),
        ("awk '/a\\/..\\/b/' README.md", "", A, Some("search-tools"), None),
        // runners
        ("python3 -c 'print(42)'", "", A, Some("python"), Some(false)),
        ("python3 -m pytest -x", "", A, Some("python"), None),
        ("python3 -m pip install flask", "", D, Some("pip-install"), None),
        ("pip install flask", "", D, Some("pip"), None),
        ("pytest -q", "", A, Some("python"), None),
        ("cargo build", "", A, Some("cargo"), Some(false)),
        ("cargo test -- --nocapture", "", A, Some("cargo"), None),
        ("cargo install cargo-edit", "", D, Some("cargo-install"), None),
        ("cargo publish", "", R, Some("publish"), None),
        ("make -j2", "", A, Some("make"), None),
        ("npm run build", "", A, Some("npm-run"), None),
        ("npm i lodash", "", D, Some("npm-install"), None),
        ("node index.js", "", A, Some("node"), None),
        ("go test ./...", "", A, Some("go"), None),
        ("go get example.com/x", "", D, Some("go-get"), None),
        // network, privilege, raw patterns
        ("curl -s http://127.0.0.1:8080/", "", D, None, None),
        ("wget http://127.0.0.1/x", "", D, None, None),
        ("ssh localhost id", "", D, None, None),
        ("nc -l 8080", "", D, None, None),
        ("ncat -l 8080", "", D, Some("network-tools"), None),
        ("sudo ls", "", D, None, None),
        ("apt-get install jq", "", D, Some("system-packages"), None),
        ("rm -rf /", "", D, None, None),
        ("rm -fr ~", "", D, None, None),
        ("rm -rf *", "", D, Some("rm-rf-root"), None),
        ("rm -r -f .", "", D, None, None),
        ("rm -rf --no-preserve-root /", "", D, None, None),
        ("rm -rf build", "", A, Some("file-edits"), Some(false)),
        ("rm README.md", "", A, Some("file-edits"), Some(false)),
        ("chmod 777 README.md", "", D, Some("chmod-777"), None),
        ("chmod -R a+rwx src", "", D, Some("chmod-777"), None),
        ("chmod +x README.md", "", A, Some("file-edits"), None),
        ("echo x > /dev/sda", "", D, None, None),
        ("echo x 2>/dev/null", "", A, Some("read-tools"), Some(true)),
        ("echo x > /dev/stderr", "", D, None, None),
        ("kill -9 1", "", D, Some("system-admin"), None),
        // default
        ("terraform plan", "", R, Some("default"), Some(false)),
        ("./configure", "", A, Some("project-programs"), None),
    ];
    run_cases(&code_policy(), &fx, cases);
}

#[test]
fn wrappers_are_unwrapped_or_refused() {
    let fx = fixture();
    #[rustfmt::skip]
    let cases: &[Case] = &[
        ("env git status", "", A, Some("git-read"), Some(true)),
        ("env -i git status", "", A, Some("git-read"), None),
        ("env -i LANG=C git status", "", A, Some("git-read"), None),
        ("env -u FOO git status", "", A, Some("git-read"), None),
        ("env -- ls", "", A, Some("read-tools"), None),
        ("env git push", "", R, Some("git-publish"), None),
        ("env PATH=/tmp git status", "", D, Some("builtin:assignment"), None),
        ("env -S 'git status'", "", D, Some("builtin:unsafe-wrapper"), None),
        ("env -C /etc cat passwd", "", D, Some("builtin:unsafe-wrapper"), None),
        ("FOO=1 git status", "", A, Some("git-read"), None),
        ("FOO=1 BAR=2 ls", "", A, Some("read-tools"), None),
        ("command ls", "", A, Some("read-tools"), None),
        ("command -v git", "", A, Some("builtin:lookup"), Some(true)),
        ("exec git status", "", A, Some("git-read"), None),
        ("nice -n 10 cargo test", "", A, Some("cargo"), None),
        ("nice -5 ls", "", A, Some("read-tools"), None),
        ("nice --adjustment=3 ls", "", A, Some("read-tools"), None),
        ("nohup make", "", A, Some("make"), None),
        ("timeout 5 ls", "", A, Some("read-tools"), None),
        ("timeout -s KILL -k 2 5 ls", "", A, Some("read-tools"), None),
        ("timeout --signal=TERM 5s cat README.md", "", A, Some("read-tools"), None),
        ("timeout 5 curl http://127.0.0.1/", "", D, None, None),
        ("timeout 5 cat /etc/passwd", "", D, Some("builtin:path-escape"), None),
        ("stdbuf -oL grep x README.md", "", A, Some("search-tools"), None),
        ("stdbuf -o 0 ls", "", A, Some("read-tools"), None),
        ("time ls", "", A, Some("read-tools"), None),
        ("time -p make", "", A, Some("make"), None),
        ("builtin echo hi", "", A, Some("read-tools"), None),
        ("nice timeout 5 env git status", "", A, Some("git-read"), None),
        ("nice timeout 5 env sudo ls", "", D, None, None),
        ("xargs cat", "", A, Some("read-tools"), None),
        ("xargs -a {out}/list cat", "", D, Some("builtin:path-escape"), None),
        ("xargs --frobnicate cat", "", D, Some("builtin:unsafe-wrapper"), None),
        ("xargs sudo cat", "", D, Some("privilege"), None),
        ("ls | xargs rm", "", A, Some("file-edits"), None),
        ("ls | xargs -n1 -I{} curl {}", "", D, None, None),
        ("su -c id", "", D, None, None),
        ("doas ls", "", D, None, None),
        ("setsid ls", "", D, Some("builtin:unsafe-wrapper"), None),
        ("chroot / ls", "", D, None, None),
        ("unshare -r ls", "", D, Some("builtin:unsafe-wrapper"), None),
        ("nsenter -t 1 ls", "", D, Some("builtin:unsafe-wrapper"), None),
        ("flock x ls", "", D, Some("builtin:unsafe-wrapper"), None),
        ("watch ls", "", D, Some("builtin:unsafe-wrapper"), None),
        ("parallel echo ::: a", "", D, Some("builtin:unsafe-wrapper"), None),
        ("/usr/bin/xargs ls", "", A, Some("read-tools"), None),
        // dangerous assignments
        ("LD_PRELOAD=x.so ls", "", D, Some("builtin:assignment"), None),
        ("LD_LIBRARY_PATH=. ls", "", D, Some("builtin:assignment"), None),
        ("BASH_ENV=x.sh bash -c ls", "", D, Some("builtin:assignment"), None),
        ("ENV=x sh -c ls", "", D, Some("builtin:assignment"), None),
        ("PYTHONPATH=. python3 t.py", "", A, Some("python"), None),
        ("PYTHONSTARTUP=x.py python3 t.py", "", D, Some("builtin:assignment"), None),
        ("GIT_SSH_COMMAND=x git status", "", D, Some("builtin:assignment"), None),
        ("IFS=/ ls", "", D, Some("builtin:assignment"), None),
        ("PS4='$(id)' ls", "", D, Some("builtin:assignment"), None),
        ("PROMPT_COMMAND=id ls", "", D, Some("builtin:assignment"), None),
        ("export PATH=/tmp:$PATH", "", D, Some("builtin:assignment"), None),
        ("export FOO=bar", "", A, Some("builtin:shell-state"), None),
        ("read -r PATH < README.md", "", D, Some("builtin:assignment"), None),
        ("declare -n X=PATH", "", D, Some("builtin:assignment"), None),
        ("printf -v PATH %s /tmp", "", D, Some("builtin:assignment"), None),
        ("X=/etc/passwd", "", D, Some("builtin:path-escape"), None),
        ("FOO=bar", "", A, None, None),
        // unsafe builtins
        ("alias ls=id", "", D, Some("builtin:unsafe-builtin"), None),
        ("trap 'id' EXIT", "", D, Some("builtin:unsafe-builtin"), None),
        ("hash -p /tmp/x git", "", D, Some("builtin:unsafe-builtin"), None),
        // eval and source re-read text as commands: refused outright
        ("eval 'git status'", "", D, Some("builtin:unsafe-builtin"), None),
        ("eval \"$CMD\"", "", D, Some("builtin:unsafe-builtin"), None),
        ("builtin eval 'git status'", "", D, Some("builtin:unsafe-builtin"), None),
        ("command eval 'git status'", "", D, Some("builtin:unsafe-builtin"), None),
        // code.toml lets the project's own shell files be sourced
        // (`source_files = "check"`); anything else stays refused.
        ("source ./env.sh", "", A, Some("builtin:source"), Some(false)),
        (". ./env.sh", "", A, Some("builtin:source"), Some(false)),
        ("source {out}/env.sh", "", D, Some("builtin:path-escape"), None),
        ("source <(echo ls)", "", D, Some("builtin:unsafe-builtin"), None),
    ];
    run_cases(&code_policy(), &fx, cases);
}

#[test]
fn nested_shells_and_substitutions() {
    let fx = fixture();
    #[rustfmt::skip]
    let cases: &[Case] = &[
        ("bash -c 'git status'", "", A, Some("git-read"), Some(true)),
        ("sh -c 'ls && git diff'", "", A, None, Some(true)),
        ("dash -c 'cat README.md'", "", A, Some("read-tools"), None),
        ("zsh -c 'cat /etc/passwd'", "", D, Some("builtin:path-escape"), None),
        ("bash -lc 'make test'", "", A, Some("make"), None),
        ("bash -e -c 'git push'", "", R, Some("git-publish"), None),
        ("bash -o pipefail -c 'ls | wc -l'", "", A, None, None),
        ("bash -c 'bash -c \"cat /etc/shadow\"'", "", D, Some("builtin:path-escape"), None),
        ("bash -c 'sudo id'", "", D, None, None),
        ("bash -c \"$SCRIPT\"", "", D, Some("builtin:nested-shell"), None),
        ("sh -c 'cat \"$1\"' _ /etc/passwd", "", D, Some("builtin:path-escape"), None),
        ("sh -c 'echo x > \"$1\"' _ /usr/local/x", "", D, Some("builtin:path-escape"), None),
        ("sh -c 'cat \"$1\"' _ README.md", "", A, Some("read-tools"), None),
        ("bash script.sh", "", A, Some("shell-scripts"), None),
        ("bash {out}/script.sh", "", D, Some("builtin:path-escape"), None),
        ("sh", "", A, Some("shell-scripts"), None),
        ("bash -c 'bash -c \"bash -c \\\"bash -c ls\\\"\"'", "", D, Some("builtin:nesting-depth"), None),
        // command substitution is checked recursively
        ("echo $(git rev-parse HEAD)", "", A, None, Some(true)),
        ("echo `ls`", "", A, None, None),
        ("cat $(echo /etc/passwd)", "", D, Some("builtin:path-escape"), None),
        ("echo $(curl http://127.0.0.1/)", "", D, None, None),
        ("echo \"$(sudo id)\"", "", D, None, None),
        ("cat $(ls | head -1)", "", A, None, None),
        ("cat $(echo /etc)/passwd", "", D, None, None),
        ("diff <(ls src) <(ls sub)", "", A, None, None),
        ("diff <(cat /etc/passwd) README.md", "", D, Some("builtin:path-escape"), None),
        // program position expansion
        ("$CMD status", "", D, Some("builtin:program-expansion"), None),
        ("${GIT} status", "", D, Some("builtin:program-expansion"), None),
        ("$(echo rm) -rf src", "", D, Some("builtin:program-expansion"), None),
        ("/usr/bin/ca? README.md", "", D, Some("builtin:program-expansion"), None),
        // argument expansion
        ("echo $HOME", "", A, Some("read-tools"), None),
        ("cat $HOME/.ssh/id_rsa", "", D, Some("builtin:expansion-path"), None),
        ("cat ${HOME}/.bashrc", "", D, Some("builtin:expansion-path"), None),
        ("cat /etc/$FILE", "", D, Some("builtin:path-escape"), None),
        ("cat src/$FILE", "", A, Some("read-tools"), None),
        ("cat ./$X", "", A, None, None),
        ("echo $((1 + 2))", "", A, None, None),
        // control flow: every command inside is checked (code.toml has
        // `control_flow = "check"`)
        ("for f in *; do cat $f; done", "", A, Some("read-tools"), Some(true)),
        ("if true; then ls; fi", "", A, Some("read-tools"), Some(true)),
        ("(cd /; cat etc/passwd)", "", D, None, None),
        ("{ ls; }", "", A, Some("read-tools"), Some(true)),
        ("f() { ls; }; f", "", A, Some("read-tools"), Some(false)),
        ("[[ -f x ]] && ls", "", D, Some("builtin:unsupported"), None),
        // here-documents
        ("cat <<'EOF'\n$(id)\nEOF", "", A, Some("read-tools"), None),
        ("cat <<EOF\n$(frobnicate)\nEOF", "", R, Some("default"), None),
        ("cat <<EOF\n$(cat /etc/passwd)\nEOF", "", D, Some("builtin:path-escape"), None),
        ("cat <<EOF\n$HOME and `git status`\nEOF", "", A, None, None),
        ("cat <<< hello", "", A, Some("read-tools"), None),
    ];
    run_cases(&code_policy(), &fx, cases);
}

#[test]
fn path_escapes_with_real_files() {
    let fx = fixture();
    #[rustfmt::skip]
    let cases: &[Case] = &[
        ("cat /etc/passwd", "", D, Some("builtin:path-escape"), None),
        ("cat ../../etc/passwd", "", D, Some("builtin:path-escape"), None),
        ("cat ../outside/secret.txt", "", D, Some("builtin:path-escape"), None),
        ("cat {out}/secret.txt", "", D, Some("builtin:path-escape"), None),
        ("cat {root}/README.md", "", A, Some("read-tools"), None),
        ("cat ./src/../README.md", "", A, Some("read-tools"), None),
        ("cat src/../../outside/secret.txt", "", D, Some("builtin:path-escape"), None),
        ("cat ~/.ssh/id_rsa", "", D, Some("builtin:path-escape"), None),
        ("cat ~root/.bashrc", "", D, Some("builtin:path-escape"), None),
        ("cat < /etc/shadow", "", D, Some("builtin:path-escape"), None),
        ("cat < README.md", "", A, Some("read-tools"), Some(true)),
        ("echo x > /etc/cron.d/x", "", D, None, None),
        ("echo x >> {out}/log", "", D, Some("builtin:path-escape"), None),
        ("echo x > out.txt", "", A, Some("read-tools"), Some(false)),
        ("echo x &> sub/out.txt", "", A, None, Some(false)),
        ("grep -r foo /", "", D, Some("builtin:path-escape"), None),
        ("ls /", "", D, Some("builtin:path-escape"), None),
        ("ls ..", "", D, Some("builtin:path-escape"), None),
        ("ls ..", "sub", A, Some("read-tools"), None),
        ("ls /usr/include", "", A, Some("read-tools"), None),
        ("cat /usr/share/dict/words", "", A, Some("read-tools"), None),
        ("head -c 16 /dev/urandom", "", A, Some("read-tools"), None),
        ("cat --file=/etc/passwd", "", D, Some("builtin:path-escape"), None),
        ("grep --file=../outside/secret.txt x", "", D, Some("builtin:path-escape"), None),
        ("grep --exclude-from=src/lib.rs x .", "", A, Some("search-tools"), None),
        ("sort -o/etc/passwd README.md", "", D, Some("builtin:path-escape"), None),
        ("awk -F/ '{print $1}' README.md", "", A, Some("search-tools"), None),
        // symlinks inside the root
        ("cat etc_link/passwd", "", D, Some("builtin:path-escape"), None),
        ("cat secret_link", "", D, Some("builtin:path-escape"), None),
        ("cat docs/lib.rs", "", A, Some("read-tools"), None),
        ("echo x > dangling", "", D, Some("builtin:path-escape"), None),
        ("echo x > secret_link", "", D, Some("builtin:path-escape"), None),
        ("cat loop_a", "", D, Some("builtin:path-escape"), None),
        ("ln -s /etc x && cat x/passwd", "", D, Some("builtin:path-escape"), None),
        ("ln -s ../outside x", "", D, Some("builtin:path-escape"), None),
        ("ln -s ../README.md sub/readme", "", A, Some("link"), Some(false)),
        ("ln -s ../../outside/secret.txt sub/s", "", D, Some("builtin:path-escape"), None),
        ("ln -s src/lib.rs lib_link", "", A, Some("link"), None),
        ("ln {out}/secret.txt hard", "", D, Some("builtin:path-escape"), None),
        ("ln -s src/lib.rs -t", "", A, Some("link"), None),
        ("ln -s -t sub ../README.md", "", A, Some("link"), None),
        ("ln -s -t sub ../../outside/secret.txt", "", D, Some("builtin:path-escape"), None),
        ("ln -st sub /etc/passwd", "", D, Some("builtin:path-escape"), None),
        ("cp -t", "", A, Some("copy-move"), None),
        // globs: the directory part is checked
        ("cat /etc/pass*", "", D, Some("builtin:path-escape"), None),
        ("cat /e*/passwd", "", D, Some("builtin:path-escape"), None),
        ("cat ../*/secret.txt", "", D, Some("builtin:path-escape"), None),
        ("cat src/*.rs", "", A, Some("read-tools"), None),
        ("ls *", "", A, Some("read-tools"), None),
        ("cat /etc/{passwd,shadow}", "", D, Some("builtin:path-escape"), None),
        ("cat {README.md,/etc/passwd}", "", D, Some("builtin:path-escape"), None),
        ("cat {README.md,src/lib.rs}", "", A, Some("read-tools"), None),
        ("cat src/*/../../../outside/secret.txt", "", D, Some("builtin:path-escape"), None),
        ("cat .*/outside/secret.txt", "", D, Some("builtin:path-escape"), None),
        ("ls .?", "sub", A, Some("read-tools"), None),
        ("rm -rf .*", "", D, None, None),
        ("cat {.,.}./outside/secret.txt", "", D, Some("builtin:path-escape"), None),
        // a path glued to a key
        ("dd if=/etc/passwd of=x", "", D, None, None),
        ("make DESTDIR=../outside install", "", D, Some("builtin:path-escape"), None),
        ("make DESTDIR=build/stage install", "", A, Some("make"), None),
        // writes must be inside the root, not merely readable
        ("cp src/lib.rs /usr/local/lib.rs", "", D, Some("builtin:path-escape"), None),
        ("cp src/lib.rs sub/", "", A, Some("copy-move"), Some(false)),
        ("cp /usr/share/dict/words sub/", "", A, Some("copy-move"), None),
        ("cp {out}/secret.txt sub/", "", D, Some("builtin:path-escape"), None),
        ("cp -t /usr/local src/lib.rs", "", D, Some("builtin:path-escape"), None),
        ("mv README.md ../README.md", "", D, Some("builtin:path-escape"), None),
        ("touch /usr/local/x", "", D, Some("builtin:path-escape"), None),
        ("mkdir -p build/out", "", A, Some("file-edits"), Some(false)),
        ("tee sub/log.txt", "", A, Some("file-edits"), None),
        ("tee /tmp/log.txt", "", D, Some("builtin:path-escape"), None),
        ("rm -r sub", "", A, Some("file-edits"), None),
        ("rm -r {root}", "", D, Some("builtin:path-escape"), None),
        ("rm -r ../root", "", D, Some("builtin:path-escape"), None),
        // program paths
        ("/tmp/git status", "", D, Some("builtin:path-escape"), None),
        ("./git status", "", A, Some("project-programs"), None),
        ("{out}/secret.txt", "", D, Some("builtin:path-escape"), None),
        ("../bin/cat README.md", "", D, Some("builtin:path-escape"), None),
        ("/usr/bin/env ls", "", A, None, None),
    ];
    run_cases(&code_policy(), &fx, cases);
}

#[test]
fn cd_is_tracked() {
    let fx = fixture();
    #[rustfmt::skip]
    let cases: &[Case] = &[
        ("cd sub && ls", "", A, None, Some(true)),
        ("cd sub && cat ../README.md", "", A, Some("read-tools"), None),
        ("cd sub/deep && cat ../../README.md", "", A, Some("read-tools"), None),
        ("cd sub/deep && cat ../../../outside/secret.txt", "", D, Some("builtin:path-escape"), None),
        ("cd / && cat etc/passwd", "", D, Some("builtin:path-escape"), None),
        ("cd /etc; cat passwd", "", D, Some("builtin:path-escape"), None),
        ("cd ..", "", D, Some("builtin:path-escape"), None),
        ("cd ..", "sub", A, Some("builtin:cd"), None),
        ("cd", "", D, Some("builtin:cd"), None),
        ("cd ~", "", D, Some("builtin:cd"), None),
        ("cd -", "", D, Some("builtin:cd"), None),
        ("cd $DIR", "", D, Some("builtin:cd"), None),
        ("cd etc_link", "", D, Some("builtin:path-escape"), None),
        ("cd docs && cat lib.rs", "", A, None, None),
        // `cd` may fail or not run: every possible directory must pass.
        ("cd sub/deep/x/y || cat ../../../../README.md", "", D, Some("builtin:path-escape"), None),
        ("cd sub; cat ../README.md", "", D, Some("builtin:path-escape"), None),
        ("true || cd sub && cat ../README.md", "", D, Some("builtin:path-escape"), None),
        ("cd sub | cat ../README.md", "", D, Some("builtin:path-escape"), None),
        ("cd sub && cd deep && cat ../../README.md", "", A, None, None),
        // the working directory itself (a request's cwd inside the root)
        ("cat ../README.md", "sub", A, Some("read-tools"), None),
        ("cat ../../outside/secret.txt", "sub", D, Some("builtin:path-escape"), None),
        ("bash -c 'cd sub && cat ../README.md'", "", A, None, None),
        ("bash -c 'cd / && cat etc/passwd'", "", D, None, None),
    ];
    run_cases(&code_policy(), &fx, cases);
}

#[test]
fn strictest_part_decides_and_reports_token() {
    let fx = fixture();
    let policy = code_policy();
    let ctx = Context {
        root: &fx.root,
        cwd: &fx.root,
    };
    let d = policy
        .decide(
            &CommandSpec::Shell("git status && cat /etc/passwd && terraform apply".into()),
            &ctx,
        )
        .unwrap();
    assert_eq!(d.verdict, D);
    assert_eq!(d.rule, "builtin:path-escape");
    assert_eq!(d.token.as_deref(), Some("/etc/passwd"));
    assert!(d.reason.contains("/etc/passwd"), "{}", d.reason);

    let d = policy
        .decide(
            &CommandSpec::Shell("git status && terraform apply".into()),
            &ctx,
        )
        .unwrap();
    assert_eq!(d.verdict, R);
    assert_eq!(d.token.as_deref(), Some("terraform"));
    assert!(!d.read_only);

    let d = policy
        .decide(&CommandSpec::Shell("git status | cat".into()), &ctx)
        .unwrap();
    assert_eq!(d.verdict, A);
    assert!(d.read_only);
    assert!(d.needs_shell);

    let d = policy
        .decide(&CommandSpec::Shell("git status".into()), &ctx)
        .unwrap();
    assert!(!d.needs_shell);
    assert_eq!(d.risk, agent_exec_policy::RiskLevel::Low);

    let d = policy
        .decide(&CommandSpec::Shell("cd sub".into()), &ctx)
        .unwrap();
    assert!(d.needs_shell, "cd is a shell builtin and cannot be exec'd");
}

#[test]
fn argv_words_are_literal() {
    let fx = fixture();
    let policy = code_policy();
    let ctx = Context {
        root: &fx.root,
        cwd: &fx.root,
    };
    let argv = |v: &[&str]| CommandSpec::Argv(v.iter().map(|s| s.to_string()).collect());

    let d = policy.decide(&argv(&["git", "status"]), &ctx).unwrap();
    assert_eq!(
        (d.verdict, d.rule.as_str(), d.needs_shell, d.read_only),
        (A, "git-read", false, true)
    );

    // `$(id)` and `;` are plain characters in an argv: no substitution, no
    // second command, so only the file name is judged.
    let d = policy
        .decide(&argv(&["cat", "$(id); rm -rf src"]), &ctx)
        .unwrap();
    assert_eq!(d.verdict, A, "{}", d.reason);
    assert!(!d.needs_shell);

    let d = policy.decide(&argv(&["cat", "/etc/passwd"]), &ctx).unwrap();
    assert_eq!((d.verdict, d.rule.as_str()), (D, "builtin:path-escape"));

    let d = policy
        .decide(&argv(&["bash", "-c", "cat /etc/passwd"]), &ctx)
        .unwrap();
    assert_eq!(d.verdict, D, "nested scripts in an argv are still decided");

    let d = policy.decide(&argv(&["*"]), &ctx).unwrap();
    assert_eq!(
        d.verdict, R,
        "a literal `*` program is just an unknown name"
    );

    assert!(policy.decide(&CommandSpec::Argv(vec![]), &ctx).is_err());
}

#[test]
fn parse_errors_are_returned() {
    let fx = fixture();
    let policy = code_policy();
    let ctx = Context {
        root: &fx.root,
        cwd: &fx.root,
    };
    assert!(
        policy
            .decide(&CommandSpec::Shell("echo 'unterminated".into()), &ctx)
            .is_err()
    );
    assert!(
        policy
            .decide(&CommandSpec::Shell("   ".into()), &ctx)
            .is_err()
    );
}

/// A PATH entry inside the root could hold a planted binary: names are not
/// trusted then, and only exact-path rules (or the default) apply.
#[test]
fn program_names_resolving_into_the_root_do_not_match_allow_rules() {
    let fx = fixture();
    let bin = fx.root.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let fake = bin.join("git");
    std::fs::write(&fake, "#!/bin/sh\necho planted\n").unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let text = format!(
        "name = \"p\"\ndefault = \"require_approval\"\n[env]\npath = \"{}:/usr/bin:/bin\"\n\
         [[rule]]\nid = \"git\"\naction = \"allow\"\nprogram = \"git\"\nrisk = \"low\"\nreason = \"x\"\n\
         [[rule]]\nid = \"cat\"\naction = \"allow\"\nprogram = \"cat\"\nrisk = \"low\"\nreason = \"x\"\n\
         [[rule]]\nid = \"no-curl\"\naction = \"deny\"\nprogram = \"curl\"\nrisk = \"high\"\nreason = \"x\"\n",
        bin.display()
    );
    let policy = Policy::parse(&text, "p.toml").unwrap();
    let ctx = Context {
        root: &fx.root,
        cwd: &fx.root,
    };
    let decide = |c: &str| policy.decide(&CommandSpec::Shell(c.into()), &ctx).unwrap();
    assert_eq!(decide("git status").rule, "default");
    // `cat` resolves to the system binary, but `bin/cat` could be planted
    // by an earlier command of the same request.
    assert_eq!(decide("cat README.md").rule, "default");
    // Refusals still apply by name.
    assert_eq!(decide("curl x").verdict, D);
    // The same policy with a system-only PATH matches by name again.
    let system =
        Policy::parse(&text.replace(&format!("{}:", bin.display()), ""), "p.toml").unwrap();
    let d = system
        .decide(&CommandSpec::Shell("cat README.md".into()), &ctx)
        .unwrap();
    assert_eq!((d.verdict, d.rule.as_str()), (A, "cat"));
}

/// A program given by path matches a name rule only when the bare name
/// resolves to exactly that path; a copy elsewhere is just a file.
#[test]
fn program_paths_match_rules_only_where_the_name_resolves() {
    let fx = fixture();
    let policy = code_policy();
    let ctx = Context {
        root: &fx.root,
        cwd: &fx.root,
    };
    let decide = |c: &str| policy.decide(&CommandSpec::Shell(c.into()), &ctx).unwrap();
    let ls = agent_exec_policy::resolve_program("ls", &policy.env.path).expect("ls on PATH");
    let d = decide(&format!("{} -la", ls.display()));
    assert_eq!(
        (d.verdict, d.rule.as_str()),
        (A, "read-tools"),
        "{}",
        d.reason
    );

    std::fs::copy(&ls, fx.root.join("ls")).unwrap();
    // A copy inside the root is the project's own program, not `ls`: it
    // runs as one (contained by the kernel), never under ls's read-only rule.
    let d = decide("./ls -la");
    assert_eq!(
        (d.verdict, d.rule.as_str(), d.read_only),
        (A, "project-programs", false),
        "{}",
        d.reason
    );
    let d = decide(&format!("{}/ls", fx.root.display()));
    assert_eq!(
        (d.verdict, d.rule.as_str()),
        (A, "project-programs"),
        "{}",
        d.reason
    );

    std::fs::copy(&ls, fx.outside.join("ls")).unwrap();
    let d = decide(&format!("{}/ls", fx.outside.display()));
    assert_eq!(
        (d.verdict, d.rule.as_str()),
        (D, "builtin:path-escape"),
        "{}",
        d.reason
    );

    // Refusals match by the last component wherever the file is.
    let d = decide("./ncat -l 8080");
    assert_eq!(
        (d.verdict, d.rule.as_str()),
        (D, "network-tools"),
        "{}",
        d.reason
    );
    let d = decide("/usr/local/bin/sudo ls");
    assert_eq!(d.verdict, D);
}

/// Bash evaluates some values as code: arithmetic and array subscripts
/// expand `$(...)` found inside a variable's value, and a few builtins run
/// text given as an argument. A payload set in single quotes (which the
/// lexer rightly sees as inert) then runs unchecked. Every such path is
/// refused; the same expansions without a variable stay allowed.
#[test]
fn hidden_evaluation_is_refused() {
    let fx = fixture();
    const E: Option<&str> = Some("builtin:evaluation");
    const U: Option<&str> = Some("builtin:unsafe-builtin");
    #[rustfmt::skip]
    let cases: &[Case] = &[
        // arithmetic naming a variable
        ("x='a[$(id)]'; echo $((x))", "", D, E, None),
        ("echo $((x + 1))", "", D, E, None),
        ("echo $(( $x ))", "", D, E, None),
        ("echo $(( $(cat n.txt) ))", "", D, E, None),
        ("echo $[x]", "", D, E, None),
        ("echo \"$[x]\"", "", D, E, None),
        ("y=$((x)) git status", "", D, E, None),
        ("cat <<< $((x))", "", D, E, None),
        ("echo \"${x:-$((x))}\"", "", D, E, None),
        // subscripts, offsets, indirection, @P
        ("echo ${a[x]}", "", D, E, None),
        ("echo ${a[$x]}", "", D, E, None),
        ("echo \"${#a[i]}\"", "", D, E, None),
        ("echo ${a[x]:-none}", "", D, E, None),
        ("echo ${x:$n}", "", D, E, None),
        ("echo ${x:0:n}", "", D, E, None),
        ("echo ${@:x}", "", D, E, None),
        ("echo ${!x}", "", D, E, None),
        ("set -- x; echo \"${!1}\"", "", D, E, None),
        ("echo ${x@P}", "", D, E, None),
        ("echo ${x/a/${b[i]}}", "", D, E, None),
        // unquoted here-document bodies are expanded
        ("cat <<EOF\n$((x))\nEOF", "", D, E, None),
        ("cat <<EOF\n'${x@P}'\nEOF", "", D, E, None),
        // builtins that evaluate arithmetic
        ("let x", "", D, E, None),
        ("let 'a[$(id)]'", "", D, E, None),
        ("declare -i y=x", "", D, E, None),
        ("local -ia y", "", D, E, None),
        ("declare -a a='([$(id)]=1)'", "", D, E, None),
        ("RANDOM='a[$(id)]'", "", D, E, None),
        ("OPTIND=x git status", "", D, E, None),
        ("read OPTIND < README.md", "", D, E, None),
        // variable names with subscripts that name a value, or computed
        ("printf -v 'a[$(id)]' x", "", D, E, None),
        ("printf -v'a[$(id)]' x", "", D, E, None),
        ("read 'a[$(id)]' < README.md", "", D, E, None),
        ("read -r -a 'a[i]' < README.md", "", D, E, None),
        ("read \"$name\" < README.md", "", D, E, None),
        ("declare 'a[$(id)]=1'", "", D, E, None),
        ("export 'a[i]=1'", "", D, E, None),
        ("typeset 'a[$(id)]'", "", D, E, None),
        ("readonly \"$n=1\"", "", D, E, None),
        ("unset 'a[$(id)]'", "", D, E, None),
        ("mapfile 'a[$(id)]' < README.md", "", D, E, None),
        ("getopts ab 'a[$(id)]'", "", D, E, None),
        ("wait -n -p 'a[$(id)]'", "", D, E, None),
        ("test -v 'a[$(id)]'", "", D, E, None),
        ("[ -v 'a[$(id)]' ]", "", D, E, None),
        ("echo {a[x]}>/dev/null", "", D, E, None),
        ("exec {a[$(id)]}</dev/null", "", D, E, None),
        // loader variables stay refused behind a subscript or `{NAME}>`
        ("declare 'PATH[0]=/tmp/x'", "", D, Some("builtin:assignment"), None),
        ("exec {IFS}>/dev/null", "", D, Some("builtin:assignment"), None),
        ("BASH_CMDS=x", "", D, Some("builtin:assignment"), None),
        // builtins that run text
        ("mapfile -C id -c 1 a < README.md", "", D, U, None),
        ("readarray -tCid a < README.md", "", D, U, None),
        ("jobs -x id", "", D, U, None),
        ("compgen -W '$(id)' x", "", D, U, None),
        ("compgen -C id x", "", D, U, None),
        ("trap 'id' DEBUG", "", D, U, None),
        ("enable -f ./x.so x", "", D, U, None),
        ("fc -s", "", D, U, None),
        ("complete -C id git", "", D, U, None),
        ("hash -p ./x git", "", D, U, None),
        // options that change what later words mean
        ("set -k; git status GIT_DIR=x", "", D, U, None),
        ("set -ek", "", D, U, None),
        ("set -o keyword", "", D, U, None),
        ("set -euo keyword", "", D, U, None),
        ("shopt -s cdable_vars", "", D, U, None),
        ("shopt -so keyword", "", D, U, None),
        ("shopt -s expand_aliases", "", D, U, None),
        ("set -euo pipefail", "", A, Some("builtin:shell-state"), None),
        ("set +k", "", A, Some("builtin:shell-state"), None),
        ("set -- -k keyword", "", A, Some("builtin:shell-state"), None),
        ("shopt -u cdable_vars", "", A, Some("builtin:shell-state"), None),
        ("shopt -s nullglob globstar", "", A, Some("builtin:shell-state"), None),
        ("[[ x -eq 1 ]]", "", D, Some("builtin:unsupported"), None),
        ("(( x ))", "", D, None, None),
        // near misses that stay allowed
        ("echo $((1+2))", "", A, Some("read-tools"), None),
        ("echo $(( (0x10 + 8#7) * 2 ))", "", A, Some("read-tools"), None),
        ("echo $[3*4]", "", A, Some("read-tools"), None),
        ("grep '$(' src/lib.rs", "", A, Some("search-tools"), None),
        ("grep -n '${a[x]} $((x))' src/lib.rs", "", A, Some("search-tools"), None),
        ("printf '%s\\n' x", "", A, Some("read-tools"), None),
        ("printf -v out '%s' x", "", A, Some("read-tools"), None),
        ("echo ${HOME}", "", A, Some("read-tools"), None),
        ("echo \"${x:-default}\" ${#x} ${a[@]} ${a[0]} ${x:1:2} ${x: -1} ${x@Q} ${!pre*}", "", A, Some("read-tools"), None),
        ("echo \"\\$((x))\" \\${!x}", "", A, Some("read-tools"), None),
        ("cat <<'EOF'\n$((x)) ${x@P}\nEOF", "", A, Some("read-tools"), None),
        ("read -r line < README.md", "", A, Some("builtin:shell-state"), None),
        ("read -r -a parts < README.md", "", A, Some("builtin:shell-state"), None),
        ("declare -a list", "", A, Some("builtin:shell-state"), None),
        ("let 1+2", "", A, Some("builtin:shell-state"), None),
        ("RANDOM=42", "", A, Some("builtin:shell-state"), None),
        ("unset GIT_DIR", "", A, Some("builtin:shell-state"), None),
        ("test -v HOME", "", A, Some("read-tools"), None),
        ("echo x {fd}>/dev/null", "", A, Some("read-tools"), None),
        ("echo {a,b}>/dev/null", "", A, Some("read-tools"), None),
    ];
    run_cases(&code_policy(), &fx, cases);
}

/// `[shell] evaluation` can send these to a human instead, and cannot be
/// set to `check` (nothing could be checked).
#[test]
fn evaluation_key_sets_the_verdict() {
    let fx = fixture();
    let text = "name = \"t\"\ndefault = \"allow\"\n[shell]\nevaluation = \"require_approval\"\n";
    let policy = Policy::parse(text, "t.toml").unwrap();
    run_cases(
        &policy,
        &fx,
        &[
            ("echo $((x))", "", R, Some("builtin:evaluation"), None),
            (
                "printf -v 'a[$(id)]' x",
                "",
                R,
                Some("builtin:evaluation"),
                None,
            ),
            ("echo $((1+2))", "", A, None, None),
        ],
    );
    let err = Policy::parse(
        "name = \"t\"\ndefault = \"allow\"\n[shell]\nevaluation = \"check\"\n",
        "t.toml",
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("shell.evaluation"), "{err}");
}

/// Each refused form really runs code in bash: with a payload that creates
/// a file, bash creates it. (If bash stopped evaluating one, this test
/// says which case no longer needs refusing.) The policy refuses all.
#[test]
fn refused_evaluations_run_code_in_real_bash() {
    let fx = fixture();
    let policy = code_policy();
    let canary = fx.root.join("evaluated");
    // `a[$(touch FILE)]` in single quotes: inert to the lexer.
    let payload = format!("'a[$(touch {})]'", canary.display());
    let scripts = [
        "x=P; echo $((x))",
        "x=P; echo $[x]",
        "x=P; echo ${a[x]}",
        "x=P; echo ${x:x}",
        "x=P; echo ${!x}",
        "set -- P; echo ${!1}",
        "let P",
        "x=P; declare -i y=x",
        "printf -v P x",
        "read P <<< x",
        "declare P=1",
        "test -v P",
        "RANDOM=P",
        "x=P; echo {a[x]}>/dev/null",
        "x=P; cat <<EOF\n$((x))\nEOF",
    ];
    for script in scripts {
        let script = script.replace('P', &payload);
        let _ = std::fs::remove_file(&canary);
        let ctx = Context {
            root: &fx.root,
            cwd: &fx.root,
        };
        let d = policy
            .decide(&CommandSpec::Shell(script.clone()), &ctx)
            .unwrap();
        assert_eq!(
            (d.verdict, d.rule.as_str()),
            (D, "builtin:evaluation"),
            "{script}: {d:?}"
        );
        std::process::Command::new("bash")
            .args(["-p", "-c", &script])
            .current_dir(&fx.root)
            .output()
            .unwrap();
        assert!(canary.exists(), "bash did not run the payload of {script}");
    }
    // The `${x@P}` payload is a plain substitution.
    let _ = std::fs::remove_file(&canary);
    let script = format!("x='$(touch {})'; echo ${{x@P}}", canary.display());
    let ctx = Context {
        root: &fx.root,
        cwd: &fx.root,
    };
    let d = policy
        .decide(&CommandSpec::Shell(script.clone()), &ctx)
        .unwrap();
    assert_eq!(
        (d.verdict, d.rule.as_str()),
        (D, "builtin:evaluation"),
        "{script}: {d:?}"
    );
    std::process::Command::new("bash")
        .args(["-p", "-c", &script])
        .output()
        .unwrap();
    assert!(canary.exists(), "bash did not run the payload of {script}");
}

/// `set -k` and `cdable_vars` make bash run something other than the words
/// that were checked: an argument becomes an environment variable, a
/// relative `cd` leaves the root. Bash really does so; the policy refuses.
#[test]
fn meaning_changing_options_act_in_real_bash() {
    let fx = fixture();
    let policy = code_policy();
    let ctx = Context {
        root: &fx.root,
        cwd: &fx.root,
    };
    let outside = fx.outside.display().to_string();
    let cases = [
        ("set -k\nprintenv XYZ XYZ=canary".to_string(), "canary"),
        (
            format!("shopt -s cdable_vars\naway={outside}\ncd away && pwd"),
            outside.as_str(),
        ),
    ];
    for (script, effect) in &cases {
        let d = policy
            .decide(&CommandSpec::Shell(script.clone()), &ctx)
            .unwrap();
        assert_eq!(
            (d.verdict, d.rule.as_str()),
            (D, "builtin:unsafe-builtin"),
            "{script}: {d:?}"
        );
        let out = std::process::Command::new("bash")
            .args(["-p", "-c", script])
            .current_dir(&fx.root)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            stdout.contains(effect),
            "bash did not show the effect of {script}: {stdout}"
        );
    }
}
