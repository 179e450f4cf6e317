//! Table-driven lexer cases. Each expectation is a compact rendering of the
//! whole `Script` (see `render`), so a case checks words, operators,
//! redirections, features, substitutions and `needs_shell` at once.

use agent_exec_lexer::{
    Features, MAX_DEPTH, Operator, ParseError, Redirect, RedirectKind, Role, Script, Word, lex,
};

/// Feature letters in a fixed order: q quoted, c command substitution,
/// p process substitution, v parameter, a arithmetic, g glob, b brace,
/// t tilde.
fn features(f: &Features) -> String {
    let mut s = String::new();
    for (on, c) in [
        (f.quoted, 'q'),
        (f.command_substitution, 'c'),
        (f.process_substitution, 'p'),
        (f.parameter_expansion, 'v'),
        (f.arithmetic, 'a'),
        (f.glob, 'g'),
        (f.brace, 'b'),
        (f.tilde, 't'),
    ] {
        if on {
            s.push(c);
        }
    }
    s
}

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('\n', "\\n")
        .replace('\t', "\\t")
}

/// Backslashes, newlines and tabs escaped so every value renders on one
/// line without ambiguity; `«»` marks values that are empty or hold spaces.
fn text(v: &str) -> String {
    let v = escape(v);
    if v.is_empty() || v.contains(' ') {
        format!("«{v}»")
    } else {
        v
    }
}

/// `value[@features][{substitution}...]`
fn word(w: &Word) -> String {
    let mut s = text(&w.value);
    let f = features(&w.features);
    if !f.is_empty() {
        s.push('@');
        s.push_str(&f);
    }
    for sub in &w.substitutions {
        s.push('{');
        s.push_str(&render(sub));
        s.push('}');
    }
    s
}

fn redirect(r: &Redirect) -> String {
    let mut s = r.fd.map(|fd| fd.to_string()).unwrap_or_default();
    s.push_str(match r.kind {
        RedirectKind::Input => "<",
        RedirectKind::Output => ">",
        RedirectKind::Append => ">>",
        RedirectKind::ReadWrite => "<>",
        RedirectKind::OutputBoth => "&>",
        RedirectKind::AppendBoth => "&>>",
        RedirectKind::Duplicate => ">&",
        RedirectKind::HereDoc => "<<",
        RedirectKind::HereString => "<<<",
    });
    s.push_str(&word(&r.target));
    if let Some(body) = &r.heredoc {
        s.push_str(&format!("«{}»", escape(body)));
    }
    s
}

fn op(o: Operator) -> &'static str {
    match o {
        Operator::Seq => ";",
        Operator::And => "&&",
        Operator::Or => "||",
        Operator::Pipe => "|",
        Operator::Background => "&",
    }
}

/// Commands as `%assignment word... redirect...` joined by their
/// operators, then ` !!construct,...` for unsupported constructs, the
/// trailing operator, and ` [sh]` when a shell is needed.
fn render(s: &Script) -> String {
    let mut out = String::new();
    for c in &s.commands {
        if let Some(o) = c.joined_by {
            out.push(' ');
            out.push_str(op(o));
            out.push(' ');
        }
        let parts: Vec<String> = c
            .assignments
            .iter()
            .map(|a| format!("%{}", word(a)))
            .chain(c.words.iter().map(word))
            .chain(c.redirects.iter().map(redirect))
            .collect();
        match c.role {
            Role::LoopHeader => out.push_str("for:"),
            Role::CasePattern => out.push_str("pat:"),
            _ => {}
        }
        out.push_str(&parts.join(" "));
    }
    if !s.control.is_empty() {
        let names: Vec<&str> = s.control.iter().map(|(n, _)| n.as_str()).collect();
        out.push_str(&format!(" ~~{}", names.join(",")));
    }
    if !s.functions.is_empty() {
        let names: Vec<&str> = s.functions.iter().map(|(n, _)| n.as_str()).collect();
        out.push_str(&format!(" fn={}", names.join(",")));
    }
    if !s.unsupported.is_empty() {
        let names: Vec<&str> = s.unsupported.iter().map(|(n, _)| n.as_str()).collect();
        out.push_str(&format!(" !!{}", names.join(",")));
    }
    if let Some(t) = s.terminator {
        out.push(' ');
        out.push_str(op(t));
    }
    if s.needs_shell {
        out.push_str(" [sh]");
    }
    out
}

fn outcome(input: &str) -> String {
    match lex(input) {
        Ok(s) => render(&s),
        Err(ParseError::Unterminated { what, position }) => {
            format!("ERR unterminated {what} @{position}")
        }
        Err(ParseError::Unexpected { token, position }) => {
            format!("ERR unexpected {token} @{position}")
        }
        Err(ParseError::TooDeep { position, .. }) => format!("ERR too deep @{position}"),
        Err(ParseError::Empty) => "ERR empty".to_string(),
        Err(other) => format!("ERR {other}"),
    }
}

fn check(cases: &[(&str, &str)]) {
    let mut failures = Vec::new();
    for (input, expected) in cases {
        let got = outcome(input);
        if got != *expected {
            failures.push(format!(
                "input:    {input:?}\nexpected: {expected}\ngot:      {got}"
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n\n")
    );
}

#[test]
fn errors() {
    check(&[
        ("echo $[1", "ERR unterminated arithmetic expansion @5"),
        ("echo $\\\n(id)", "ERR unexpected \\<newline> @6"),
        ("echo \"$\\\n(id)\"", "ERR unexpected \\<newline> @7"),
        ("ls ; ; pwd", "ERR unexpected ; @5"),
        ("cat <<EOF", "ERR unterminated here-document @4"),
        ("# only", "ERR empty"),
        ("   ", "ERR empty"),
        ("&& ls", "ERR unexpected && @0"),
        ("| ls", "ERR unexpected | @0"),
        ("; ls", "ERR unexpected ; @0"),
        ("ls |", "ERR unexpected | @3"),
        ("ls &&", "ERR unexpected && @3"),
        ("ls ||", "ERR unexpected || @3"),
        ("ls | | wc", "ERR unexpected | @5"),
        ("ls && && pwd", "ERR unexpected && @6"),
        ("ls & && pwd", "ERR unexpected && @5"),
        ("ls ;;", "ERR unexpected ;; @3"),
        ("ls )", "ERR unexpected ) @3"),
        ("echo a(b)", "ERR unexpected ( @6"),
        ("ls >", "ERR unexpected end of input @4"),
        ("ls > ;", "ERR unexpected ; @5"),
        ("ls 2>", "ERR unexpected end of input @5"),
        ("cat <", "ERR unexpected end of input @5"),
        ("echo 'abc", "ERR unterminated single quote @5"),
        ("echo \"abc", "ERR unterminated double quote @5"),
        ("echo $'abc", "ERR unterminated ANSI-C quote @5"),
        ("echo $(ls", "ERR unterminated command substitution @5"),
        ("echo $((1+2", "ERR unterminated arithmetic expansion @5"),
        ("echo ${x", "ERR unterminated parameter expansion @5"),
        ("echo `ls", "ERR unterminated backquote @5"),
        ("echo \"$(ls\"", "ERR unterminated double quote @10"),
        ("diff <(ls", "ERR unterminated process substitution @5"),
        ("( ls", "ERR unterminated group `(` @0"),
        ("{ ls", "ERR unterminated group `{` @0"),
        ("case x in a) ls;;", "ERR unterminated case @0"),
        ("echo é'ü", "ERR unterminated single quote @7"),
        ("ls &&\n", "ERR unexpected && @3"),
        ("cat <<EOF\nno end", "ERR unterminated here-document @4"),
        (
            "cat <<EOF\n$(echo\nEOF\n",
            "ERR unterminated command substitution @10",
        ),
        ("\n\n", "ERR empty"),
        ("# a\n# b\n", "ERR empty"),
        ("a=(1 2)", "ERR unexpected ( @2"),
        ("echo $((1) )", "ERR unexpected ) @9"),
        ("{", "ERR unterminated group `{` @0"),
    ]);
}

#[test]
fn heredocs() {
    check(&[
        // Bash joins continued lines of an unquoted body before looking for
        // the delimiter: `EO\` + `F` ends it, and `echo INJ` runs.
        (
            "cat <<EOF\nEO\\\nF\necho INJ\nEOF\n",
            "cat <<EOF«» ; echo INJ ; EOF [sh]",
        ),
        // ...and `x\` + `EOF` is not the delimiter.
        (
            "cat <<EOF\nx\\\nEOF\necho hidden\nEOF\n",
            "cat <<EOF«x\\\\\\nEOF\\necho hidden\\n» [sh]",
        ),
        // An escaped backslash does not continue the line.
        (
            "cat <<EOF\nx\\\\\nEOF\necho INJ\nEOF\n",
            "cat <<EOF«x\\\\\\\\\\n» ; echo INJ ; EOF [sh]",
        ),
        // A quoted body is literal: no joining.
        (
            "cat <<'EOF'\nEO\\\nF\necho INJ\nEOF\n",
            "cat <<EOF@q«EO\\\\\\nF\\necho INJ\\n» [sh]",
        ),
        ("cat <<EOF\nhello\nEOF\n", "cat <<EOF«hello\\n» [sh]"),
        (
            "cat <<EOF\nhello $USER\nEOF\n",
            "cat <<EOF@v«hello $USER\\n» [sh]",
        ),
        (
            "cat <<EOF\n$(rm -rf /) and `id`\nEOF\n",
            "cat <<EOF@c{rm -rf /}{id}«$(rm -rf /) and `id`\\n» [sh]",
        ),
        (
            "cat <<EOF\n\\$(not) \\`x\\`\nEOF\n",
            "cat <<EOF«\\\\$(not) \\\\`x\\\\`\\n» [sh]",
        ),
        (
            "cat <<'EOF'\n$(rm -rf /)\nEOF\n",
            "cat <<EOF@q«$(rm -rf /)\\n» [sh]",
        ),
        ("cat <<\"EOF\"\n$x\nEOF\n", "cat <<EOF@q«$x\\n» [sh]"),
        ("cat <<\\EOF\n$x\nEOF\n", "cat <<EOF@q«$x\\n» [sh]"),
        ("cat <<E\"O\"F\n$x\nEOF\n", "cat <<EOF@q«$x\\n» [sh]"),
        (
            "cat <<-EOF\n\tfoo\n\t\tbar\n\tEOF\necho done",
            "cat <<EOF«foo\\nbar\\n» ; echo done [sh]",
        ),
        (
            "cat <<EOF > out.txt\nbody\nEOF\necho next",
            "cat <<EOF«body\\n» >out.txt ; echo next [sh]",
        ),
        ("cat <<A <<B\na\nA\nb\nB\n", "cat <<A«a\\n» <<B«b\\n» [sh]"),
        (
            "cat <<EOF | grep x\nx\ny\nEOF\n",
            "cat <<EOF«x\\ny\\n» | grep x [sh]",
        ),
        ("cat <<EOF\n  EOF\nEOF", "cat <<EOF«  EOF\\n» [sh]"),
        ("cat <<EOF\nEOF", "cat <<EOF«» [sh]"),
        ("cat <<EOF\n\nEOF", "cat <<EOF«\\n» [sh]"),
        (
            "cat << 'END' >f.py\nprint(\"$x\")\nEND\npython3 f.py",
            "cat <<END@q«print(\"$x\")\\n» >f.py ; python3 f.py [sh]",
        ),
        (
            "echo $(cat <<EOF\ninner\nEOF\n)",
            "echo «$(cat <<EOF\\ninner\\nEOF\\n)»@c{cat <<EOF«inner\\n» [sh]} [sh]",
        ),
    ]);
}

#[test]
fn unsupported() {
    check(&[
        (
            "echo $( (cd x; ls) )",
            "echo «$( (cd x; ls) )»@c{cd x ; ls ~~( [sh]} [sh]",
        ),
        ("if true; then ls; fi", "true ; ls ~~if [sh]"),
        (
            "for f in a b; do echo $f; done",
            "for:f in a b ; echo $f@v ~~for [sh]",
        ),
        ("while true; do ls; done", "true ; ls ~~while [sh]"),
        ("until false; do ls; done", "false ; ls ~~until [sh]"),
        (
            "case $x in a) ls;; b|c) pwd;; esac",
            "pat:$x@v in a ; ls ; pat:b c ; pwd ~~case [sh]",
        ),
        (
            "select x in a b; do ls; done",
            "for:x in a b ; ls !!select [sh]",
        ),
        ("(cd x && ls) | wc", "cd x && ls | wc ~~( [sh]"),
        ("( ls )", "ls ~~( [sh]"),
        ("{ ls; pwd; } > out", "ls ; pwd ; >out ~~{ [sh]"),
        ("f() { ls; }", "ls ~~function,{ fn=f [sh]"),
        ("function g { ls; }", "ls ~~function,{ fn=g [sh]"),
        ("function h() { ls; }", "ls ~~function,{ fn=h [sh]"),
        ("! ls", "ls ~~! [sh]"),
        ("[[ -f x ]] && ls", "-f x ]] && ls !![[ [sh]"),
        ("(( x = 1 + 2 ))", "«(( x = 1 + 2 ))»@a !!(( [sh]"),
        ("coproc ls", "ls !!coproc [sh]"),
        ("ls; fi", "ls !!fi [sh]"),
        (
            "echo $(if x; then y; fi)",
            "echo «$(if x; then y; fi)»@c{x ; y ~~if [sh]} [sh]",
        ),
        ("(( $(id) ))", "«(( $(id) ))»@ca{id} !!(( [sh]"),
        (
            "echo $(case x in a) echo y;; esac)",
            "echo «$(case x in a) echo y;; esac)»@c{pat:x in a ; echo y ~~case [sh]} [sh]",
        ),
        ("{ ls; } 2>&1", "ls ; 2>&1 ~~{ [sh]"),
        ("}", " !!} [sh]"),
        ("ls | { wc; }", "ls | wc ~~{ [sh]"),
        ("f () { ls; }", "ls ~~function,{ fn=f [sh]"),
        ("f ( )", " ~~function fn=f [sh]"),
    ]);
}

#[test]
fn substitutions() {
    check(&[
        ("echo $(ls)", "echo $(ls)@c{ls} [sh]"),
        (
            "echo $(ls -l | grep x)",
            "echo «$(ls -l | grep x)»@c{ls -l | grep x [sh]} [sh]",
        ),
        (
            "echo \"$(ls \"$(pwd)\")\"",
            "echo «$(ls \"$(pwd)\")»@qc{ls $(pwd)@qc{pwd} [sh]} [sh]",
        ),
        (
            "echo \"a $(echo \"b $(echo c)\")\"",
            "echo «a $(echo \"b $(echo c)\")»@qc{echo «b $(echo c)»@qc{echo c} [sh]} [sh]",
        ),
        (
            "echo $(echo a; echo b)",
            "echo «$(echo a; echo b)»@c{echo a ; echo b [sh]} [sh]",
        ),
        ("echo $()", "echo $()@c{ [sh]} [sh]"),
        ("echo `ls`", "echo `ls`@c{ls} [sh]"),
        (
            "echo `ls \\`pwd\\``",
            "echo «`ls \\\\`pwd\\\\``»@c{ls `pwd`@c{pwd} [sh]} [sh]",
        ),
        (
            "echo \"`echo \\\"x\\\"`\"",
            "echo «`echo \\\\\"x\\\\\"`»@qc{echo x@q} [sh]",
        ),
        (
            "echo `echo \\$HOME`",
            "echo «`echo \\\\$HOME`»@c{echo $HOME@v [sh]} [sh]",
        ),
        ("echo ``", "echo ``@c{ [sh]} [sh]"),
        (
            "echo $((1+$(echo 2)))",
            "echo «$((1+$(echo 2)))»@ca{echo 2} [sh]",
        ),
        (
            "diff <(ls a) <(ls b)",
            "diff «<(ls a)»@p{ls a} «<(ls b)»@p{ls b} [sh]",
        ),
        ("tee >(cat) <in", "tee >(cat)@p{cat} <in [sh]"),
        ("cat a<(ls)", "cat a<(ls)@p{ls} [sh]"),
        ("X=$(id) ls", "%X=$(id)@c{id} ls [sh]"),
        ("ls 2> >(tee err)", "ls 2>«>(tee err)»@p{tee err} [sh]"),
        ("cat <<<$(date)", "cat <<<$(date)@c{date} [sh]"),
        (
            "echo $(ls) `pwd` <(id)",
            "echo $(ls)@c{ls} `pwd`@c{pwd} <(id)@p{id} [sh]",
        ),
        ("x=$(ls) y=`pwd`", "%x=$(ls)@c{ls} %y=`pwd`@c{pwd} [sh]"),
        ("echo $(echo ')')", "echo «$(echo ')')»@c{echo )@q} [sh]"),
        (
            "echo $(echo \")\")",
            "echo «$(echo \")\")»@c{echo )@q} [sh]",
        ),
        (
            "echo \"$(echo \"(\")\"",
            "echo «$(echo \"(\")»@qc{echo (@q} [sh]",
        ),
        ("echo $(echo \\))", "echo «$(echo \\\\))»@c{echo )@q} [sh]"),
        (
            "echo $(# comment )\n)",
            "echo «$(# comment )\\n)»@c{ [sh]} [sh]",
        ),
        ("echo `echo a # b`", "echo «`echo a # b`»@c{echo a} [sh]"),
        (
            "echo `echo \\\\`",
            "echo «`echo \\\\\\\\`»@c{echo \\\\} [sh]",
        ),
        ("echo 2>(true)", "echo 2>(true)@p{true} [sh]"),
        ("ls \"$(ls)\"x", "ls $(ls)x@qc{ls} [sh]"),
    ]);
}

#[test]
fn redirections() {
    check(&[
        ("a |& b", "a 2>&1 | b [sh]"),
        ("ls > out", "ls >out [sh]"),
        ("ls >> out", "ls >>out [sh]"),
        ("ls >| out", "ls >out [sh]"),
        ("cat < in", "cat <in [sh]"),
        ("cat <> rw", "cat <>rw [sh]"),
        ("ls 2> err", "ls 2>err [sh]"),
        ("ls 2>> err", "ls 2>>err [sh]"),
        ("ls 2>&1", "ls 2>&1 [sh]"),
        ("ls >&2", "ls >&2 [sh]"),
        ("ls 1>&2", "ls 1>&2 [sh]"),
        ("ls 2>&-", "ls 2>&- [sh]"),
        ("ls &> out", "ls &>out [sh]"),
        ("ls &>> out", "ls &>>out [sh]"),
        ("ls >& out", "ls &>out [sh]"),
        ("cat 0<&3", "cat 0>&3 [sh]"),
        ("cat 3< in", "cat 3<in [sh]"),
        ("ls > \"my file\"", "ls >«my file»@q [sh]"),
        ("ls > $OUT", "ls >$OUT@v [sh]"),
        ("ls >out.txt 2>err.txt", "ls >out.txt 2>err.txt [sh]"),
        ("ls 2>&1 | tee log", "ls 2>&1 | tee log [sh]"),
        (">out", ">out [sh]"),
        ("> out ls", "ls >out [sh]"),
        ("ls 10>x", "ls 10>x [sh]"),
        ("cat <<<\"$USER\"", "cat <<<$USER@qv [sh]"),
        ("cat <<< hello", "cat <<<hello [sh]"),
        (
            "ls 2>/dev/null >/dev/null",
            "ls 2>/dev/null >/dev/null [sh]",
        ),
        ("ls 99999999999>x", "ls 99999999999 >x [sh]"),
        ("ls 2 >x", "ls 2 >x [sh]"),
        ("ls a2>x", "ls a2 >x [sh]"),
        ("ls -2>x", "ls -2 >x [sh]"),
        ("ls >x<y", "ls >x <y [sh]"),
        ("ls&>x", "ls &>x [sh]"),
        ("ls>>x", "ls >>x [sh]"),
        ("echo hi>x;cat<x", "echo hi >x ; cat <x [sh]"),
        ("echo a >& 2", "echo a >&2 [sh]"),
        ("cmd 2>&1 >&- <&-", "cmd 2>&1 >&- >&- [sh]"),
        ("cmd 3>&1- 2>&x-", "cmd 3>&1- 2>x- [sh]"),
        ("ls > #c", "ERR unexpected #c @5"),
        ("ls >2>&1", "ERR unexpected 2>&1 @4"),
        ("ls >2x", "ls >2x [sh]"),
        ("cmd >&\"2\"", "cmd >&2@q [sh]"),
        ("cmd 2>&file", "cmd 2>file [sh]"),
        ("cmd <&file", "cmd <file [sh]"),
        (
            "cd src && cargo test --lib -- --nocapture 2>&1 | tail -20",
            "cd src && cargo test --lib -- --nocapture 2>&1 | tail -20 [sh]",
        ),
        ("X=1 > f", "%X=1 >f [sh]"),
        ("echo a >> \"$LOG\" 2>&1 &", "echo a >>$LOG@qv 2>&1 & [sh]"),
    ]);
}

#[test]
fn expansions() {
    check(&[
        (
            "echo $[1+2] $[a[1]*(2)]",
            "echo $[1+2]@a $[a[1]*(2)]@a [sh]",
        ),
        ("echo $[$(id)]", "echo $[$(id)]@ca{id} [sh]"),
        // Bash expands this one to `a}b c`.
        ("echo {a}b,c}", "echo {a}b,c}@b [sh]"),
        ("echo {'a,b'}a,b}", "echo {a,b}a,b}@qb [sh]"),
        ("echo {a\\,b} \\{a,b}", "echo {a,b}@q {a,b}@q"),
        ("X=\\\n~/bin ls", "%X=~/bin@t ls [sh]"),
        ("echo $\"hello $USER\"", "echo «hello $USER»@qv [sh]"),
        ("echo $HOME/x", "echo $HOME/x@v [sh]"),
        ("echo ${HOME}/x", "echo ${HOME}/x@v [sh]"),
        ("echo \"$HOME/x\"", "echo $HOME/x@qv [sh]"),
        (
            "echo $1 $@ $# $? $$ $! $- $0 $*",
            "echo $1@v $@@v $#@v $?@v $$@v $!@v $-@v $0@v $*@v [sh]",
        ),
        (
            "echo ${#arr[@]} ${x:-default} ${x/a/b}",
            "echo ${#arr[@]}@v ${x:-default}@v ${x/a/b}@v [sh]",
        ),
        (
            "echo ${x:-\"a b\"} ${x:-'c'}",
            "echo «${x:-\"a b\"}»@v ${x:-'c'}@v [sh]",
        ),
        ("echo \"${x:-'c'}\"", "echo ${x:-'c'}@qv [sh]"),
        ("echo ${x:-{a}}", "echo ${x:-{a}}@v [sh]"),
        ("echo $((1+2))", "echo $((1+2))@a [sh]"),
        ("echo $((1+(2*3)))", "echo $((1+(2*3)))@a [sh]"),
        ("echo \"$((x+1))\"", "echo $((x+1))@qa [sh]"),
        ("echo $(( $x * ${y} ))", "echo «$(( $x * ${y} ))»@va [sh]"),
        ("ls *.rs", "ls *.rs@g [sh]"),
        ("ls src/*.rs ?.txt", "ls src/*.rs@g ?.txt@g [sh]"),
        ("ls [abc].txt", "ls [abc].txt@g [sh]"),
        (
            "echo {a,b} {1..3} {x} a{b,c}d",
            "echo {a,b}@b {1..3}@b {x} a{b,c}d@b [sh]",
        ),
        (
            "echo ~ ~/x ~user a~ X=~/y",
            "echo ~@t ~/x@t ~user@t a~ X=~/y@t [sh]",
        ),
        ("PATH=~/bin:~/x ls", "%PATH=~/bin:~/x@t ls [sh]"),
        ("\"$CMD\" arg", "$CMD@qv arg [sh]"),
        ("$CMD arg", "$CMD@v arg [sh]"),
        ("ls \"$@\"", "ls $@@qv [sh]"),
        ("echo \"$HOME\"'/x'\"/$USER\"", "echo $HOME/x/$USER@qv [sh]"),
        (
            "echo \"${a[0]}\" ${!x} ${x#*/}",
            "echo ${a[0]}@qv ${!x}@v ${x#*/}@v [sh]",
        ),
        (
            "echo $((a>b?1:2)) $(( (1) ))",
            "echo $((a>b?1:2))@a «$(( (1) ))»@a [sh]",
        ),
        (
            "sed -i 's/foo/bar/g' src/*.rs",
            "sed -i s/foo/bar/g@q src/*.rs@g [sh]",
        ),
        ("echo $(( 2 ** 10 ))", "echo «$(( 2 ** 10 ))»@a [sh]"),
    ]);
}

#[test]
fn quoting() {
    check(&[
        ("grep 'a b' file.txt", "grep «a b»@q file.txt"),
        ("grep '' f", "grep «»@q f"),
        ("echo 'it''s'", "echo its@q"),
        ("echo 'a\"b$c`d\\e'", "echo a\"b$c`d\\\\e@q"),
        ("echo \"hello world\"", "echo «hello world»@q"),
        ("echo \"\"", "echo «»@q"),
        (
            "echo \"a\\\"b\\\\c\\$d\\`e\\x\"",
            "echo a\"b\\\\c$d`e\\\\x@q",
        ),
        ("echo \"line1\\nline2\"", "echo line1\\\\nline2@q"),
        ("echo a\\ b", "echo «a b»@q"),
        ("echo \\$HOME \\* \\~", "echo $HOME@q *@q ~@q"),
        ("echo a\\\\b", "echo a\\\\b@q"),
        (
            "echo $'\\cA' $'\\e[0m' $'\\q'",
            "echo \u{1}@q \u{1b}[0m@q \\\\q@q",
        ),
        ("echo \"$'x'\"", "echo $'x'@q"),
        ("echo a$ $/ \"$\"", "echo a$ $/ $@q"),
        ("echo '$HOME/x'", "echo $HOME/x@q"),
        ("echo '*' \"*.rs\" \\*", "echo *@q *.rs@q *@q"),
        ("echo '{a,b}' {} \"{1..3}\"", "echo {a,b}@q {} {1..3}@q"),
        (
            "find . -name x -exec rm {} \\;",
            "find . -name x -exec rm {} ;@q",
        ),
        ("echo '~' \"~/x\" \\~", "echo ~@q ~/x@q ~@q"),
        (
            "A=1 B=\"x y\" cmd arg C=3",
            "%A=1 %«B=x y»@q cmd arg C=3 [sh]",
        ),
        ("\"X\"=1 ls", "X=1@q ls"),
        ("echo '#x' \\#y", "echo #x@q #y@q"),
        ("\"if\" x", "if@q x"),
        ("echo ⊂ 'ñ' \"ü\"", "echo ⊂ ñ@q ü@q"),
        ("echo \"a\nb\"", "echo a\\nb@q"),
        ("echo \"a\\\nb\"", "echo ab@q"),
        ("ls \\\\\npwd", "ls \\\\@q ; pwd [sh]"),
        ("echo 'a\nb'", "echo a\\nb@q"),
        ("echo \"x\" # c", "echo x@q"),
        ("echo $'\\x'", "echo \\\\x@q"),
        ("echo $'\\u'", "echo \\\\u@q"),
        ("echo $'\\xffy'", "echo �y@q"),
        ("echo \"\\`x\\`\"", "echo `x`@q"),
        ("echo 'a\\tb'", "echo a\\\\tb@q"),
        ("echo \"a\\b\"", "echo a\\\\b@q"),
        ("echo \"a\"\"b\"'c'd", "echo abcd@q"),
        ("echo \"'\"'\"'", "echo '\"@q"),
        ("python3 -c 'print(\"hi\")'", "python3 -c print(\"hi\")@q"),
        (
            "find . -name '*.rs' -print0 | xargs -0 wc -l",
            "find . -name *.rs@q -print0 | xargs -0 wc -l [sh]",
        ),
    ]);
}

#[test]
fn operators() {
    check(&[
        ("X=1 Y+=2 env", "%X=1 %Y+=2 env [sh]"),
        ("X=1", "%X=1 [sh]"),
        ("ls && echo ok", "ls && echo ok [sh]"),
        ("ls || echo fail", "ls || echo fail [sh]"),
        ("ls; pwd", "ls ; pwd [sh]"),
        ("ls & pwd", "ls & pwd [sh]"),
        ("ls &", "ls & [sh]"),
        ("ls;", "ls ;"),
        ("a | b", "a | b [sh]"),
        ("a | b | c | d", "a | b | c | d [sh]"),
        ("a && b || c ; d & e | f", "a && b || c ; d & e | f [sh]"),
        ("ls\npwd", "ls ; pwd [sh]"),
        ("ls\n\n\npwd\n", "ls ; pwd [sh]"),
        ("ls &&\n  pwd", "ls && pwd [sh]"),
        ("ls |\n\n  wc -l", "ls | wc -l [sh]"),
        ("ls #comment\npwd", "ls ; pwd [sh]"),
        ("ls; # trailing", "ls ;"),
        (
            "ls&&pwd||echo;ls&ls|wc",
            "ls && pwd || echo ; ls & ls | wc [sh]",
        ),
        (
            "git log --oneline -5 | cat",
            "git log --oneline -5 | cat [sh]",
        ),
        (
            "rm -rf target/ && cargo build",
            "rm -rf target/ && cargo build [sh]",
        ),
        ("echo ;ls", "echo ; ls [sh]"),
    ]);
}

#[test]
fn plain() {
    check(&[
        ("ls", "ls"),
        ("  ls   -l  ", "ls -l"),
        ("ls -la /tmp", "ls -la /tmp"),
        ("git status --short", "git status --short"),
        ("echo $", "echo $"),
        ("ls [ x", "ls [ x"),
        ("echo a]b", "echo a]b"),
        ("ls X=1", "ls X=1"),
        ("1X=2 ls", "1X=2 ls"),
        ("ls # comment", "ls"),
        ("echo a#b", "echo a#b"),
        ("echo if then fi", "echo if then fi"),
        ("héllo wörld", "héllo wörld"),
        ("ls \\\n  -l", "ls -l"),
        ("ec\\\nho hi", "echo hi"),
        ("{ls}", "{ls}"),
        ("echo { }", "echo { }"),
        ("echo }", "echo }"),
        (
            "curl -s http://127.0.0.1:8080/ -o out.json",
            "curl -s http://127.0.0.1:8080/ -o out.json",
        ),
        ("sudo -u nobody ls", "sudo -u nobody ls"),
        ("echo \\", "echo \\\\"),
        ("echo x\\", "echo x\\\\"),
    ]);
}

#[test]
fn nesting_limit() {
    let nested = |n: usize| format!("echo {}x{}", "$(echo ".repeat(n), ")".repeat(n));
    assert!(lex(&nested(MAX_DEPTH)).is_ok());
    let too_deep = nested(MAX_DEPTH + 1);
    // The innermost `$(` past the limit is the one reported.
    let position = "echo ".len() + "$(echo ".len() * MAX_DEPTH;
    assert_eq!(
        lex(&too_deep),
        Err(ParseError::TooDeep {
            limit: MAX_DEPTH,
            position
        })
    );

    let quoted = format!("echo {}x{}", "\"$(echo ".repeat(100), ")\"".repeat(100));
    assert!(matches!(lex(&quoted), Err(ParseError::TooDeep { .. })));
    let braces = format!("echo {}x{}", "${a:-".repeat(100), "}".repeat(100));
    assert!(matches!(lex(&braces), Err(ParseError::TooDeep { .. })));
    let backticks = format!("echo {}", "`echo \\".repeat(40));
    assert!(lex(&backticks).is_err());
}

#[test]
fn spans_and_raw_text() {
    let input = "A=1 grep -n \"a b\" 'c d'e >out.txt 2>&1 && wc";
    let s = lex(input).unwrap();
    let c = &s.commands[0];
    assert_eq!(c.assignments[0].raw, "A=1");
    let raws: Vec<&str> = c.words.iter().map(|w| w.raw.as_str()).collect();
    assert_eq!(raws, ["grep", "-n", "\"a b\"", "'c d'e"]);
    for w in &c.words {
        assert_eq!(&input[w.span.start..w.span.end], w.raw);
    }
    assert_eq!(c.redirects[0].target.raw, "out.txt");
    assert_eq!(
        &input[c.span.start..c.span.end],
        "A=1 grep -n \"a b\" 'c d'e >out.txt 2>&1"
    );
    assert_eq!(
        &input[s.commands[1].span.start..s.commands[1].span.end],
        "wc"
    );
}

#[test]
fn spans_inside_substitutions_point_into_the_request() {
    let input = "echo \"$(cat 'f g')\" `echo \\$HOME é` <(ls -l)";
    let s = lex(input).unwrap();
    let words = &s.commands[0].words;
    let inner = &words[1].substitutions[0].commands[0].words[1];
    assert_eq!(inner.raw, "'f g'");
    assert_eq!(&input[inner.span.start..inner.span.end], "'f g'");
    // In backquotes the escaped `\$` is unescaped before lexing; the span
    // still points at the request's own bytes.
    let bt = &words[2].substitutions[0].commands[0].words;
    assert_eq!(bt[1].value, "$HOME");
    assert_eq!(bt[1].raw, "$HOME");
    assert_eq!(&input[bt[2].span.start..bt[2].span.end], "é");
    let ps = &words[3].substitutions[0].commands[0];
    assert_eq!(&input[ps.span.start..ps.span.end], "ls -l");
}

#[test]
fn constructs_carry_their_spans() {
    let input = "ls && if true; then f() { :; }; fi; [[ -f x ]]";
    let s = lex(input).unwrap();
    let spans = |list: &[(String, agent_exec_lexer::Span)]| -> Vec<(String, String)> {
        list.iter()
            .map(|(n, sp)| (n.clone(), input[sp.start..sp.end].to_string()))
            .collect()
    };
    let pair = |a: &str, b: &str| (a.to_string(), b.to_string());
    assert_eq!(
        spans(&s.control),
        [pair("if", "if"), pair("function", "f()"), pair("{", "{")]
    );
    assert_eq!(spans(&s.functions), [pair("f", "f()")]);
    assert_eq!(spans(&s.unsupported), [pair("[[", "[[")]);
    let named = lex("function g { :; }").unwrap();
    let g = &named.functions[0];
    assert_eq!(
        (g.0.as_str(), &"function g { :; }"[g.1.start..g.1.end]),
        ("g", "g")
    );
}

/// Bash itself says which words of a `for` header and a `case` it runs:
/// with `set -x`, a traced line is printed for every command run, never
/// for a loop header or a pattern. The lexer's roles must agree.
#[test]
fn roles_agree_with_bash() {
    let cases = [
        "for f in a b; do echo $f; done",
        "for f in a b\ndo echo $f\ndone",
        "case x in a|b) echo no;; (x) echo yes;; esac",
        "case x in\n  a) echo no ;;\n  x|y) echo yes ;;\nesac",
        "if false; then echo a; elif false; then echo b; else echo c; fi",
        "while false; do echo x; done; until true; do echo y; done; echo z",
        "(echo a; echo b) | cat; { echo c; }",
        "f() { echo in-f; }; f",
        "! false && echo ok",
    ];
    for input in cases {
        let input = input.replace("\\n", "\n");
        let s = lex(&input).unwrap();
        let mut programs: Vec<String> = s
            .commands
            .iter()
            .filter(|c| c.role == Role::Command)
            .filter_map(|c| c.words.first().map(|w| w.value.clone()))
            .collect();
        programs.sort();
        programs.dedup();
        let out = std::process::Command::new("bash")
            .args(["-c", &format!("set -x\n{input}")])
            .output()
            .unwrap();
        assert!(out.status.success(), "{input:?}: {out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        let mut traced = Vec::new();
        for line in stderr.lines() {
            let line = line.trim_start_matches('+').trim();
            // Bash traces a loop header and a case subject as such: the
            // lexer must show them as non-commands with the same words.
            if let Some(header) = line.strip_prefix("for ") {
                let ours: Vec<String> = s
                    .commands
                    .iter()
                    .filter(|c| c.role == Role::LoopHeader)
                    .map(|c| {
                        c.words
                            .iter()
                            .map(|w| w.value.as_str())
                            .collect::<Vec<_>>()
                            .join(" ")
                    })
                    .collect();
                assert!(
                    ours.iter().any(|o| o == header),
                    "{input:?}: {header:?} vs {ours:?}"
                );
            } else if let Some(subject) = line.strip_prefix("case ") {
                let first = s.commands.iter().find(|c| c.role == Role::CasePattern);
                let words: Vec<&str> = first.map_or(Vec::new(), |c| {
                    c.words.iter().map(|w| w.value.as_str()).collect()
                });
                assert!(
                    words.join(" ").starts_with(subject),
                    "{input:?}: {subject:?} vs {words:?}"
                );
            } else if let Some(program) = line.split_whitespace().next() {
                traced.push(program.to_string());
            }
        }
        // Every command bash ran is one the lexer shows as a command
        // (a branch not taken is a command bash did not run).
        // The cases run every command at least once: the lexer's commands
        // are exactly the programs bash ran (no pattern or header among
        // them, none missing).
        traced.sort();
        traced.dedup();
        assert_eq!(programs, traced, "{input:?}");
    }
}

#[test]
fn error_positions_point_at_the_opening() {
    for (input, position) in [
        ("echo ok 'never closed", 8),
        ("echo \"ok\" \"$(", 11),
        ("x `echo é", 2),
        ("ls && (cd a; ls", 6),
        ("echo $(echo `ls)", 12),
    ] {
        assert_eq!(
            lex(input).unwrap_err().position(),
            Some(position),
            "{input:?}"
        );
    }
}

#[test]
fn long_inputs_lex() {
    let pipeline = vec!["grep -v foo"; 40].join(" | ");
    let s = lex(&pipeline).unwrap();
    assert_eq!(s.commands.len(), 40);
    assert!(
        s.commands[1..]
            .iter()
            .all(|c| c.joined_by == Some(Operator::Pipe))
    );

    let body = "line $x with `cmd` text\n".repeat(200);
    let doc = format!("cat <<'EOF' > out\n{body}EOF\n");
    let s = lex(&doc).unwrap();
    let r = &s.commands[0].redirects[0];
    assert_eq!(r.heredoc.as_deref(), Some(body.as_str()));
    assert!(r.target.substitutions.is_empty());

    let unquoted = format!("cat <<EOF\n{body}EOF\n");
    let s = lex(&unquoted).unwrap();
    let target = &s.commands[0].redirects[0].target;
    assert_eq!(target.substitutions.len(), 200);
    assert!(target.features.command_substitution && target.features.parameter_expansion);

    let groups = "(".repeat(10_000);
    assert!(matches!(lex(&groups), Err(ParseError::Unterminated { .. })));
    let words = "a ".repeat(20_000);
    assert_eq!(lex(&words).unwrap().commands[0].words.len(), 20_000);
}

/// Commands of the kind agents send most.
#[test]
fn realistic() {
    check(&[
        (
            "git commit -m \"msg with 'quotes' and \\\"escapes\\\"\"",
            "git commit -m «msg with 'quotes' and \"escapes\"»@q",
        ),
        (
            "ls -la | grep -E '^d' | awk '{print $9}'",
            "ls -la | grep -E ^d@q | awk «{print $9}»@q [sh]",
        ),
        (
            "find . -type f -name \"*.py\" -exec grep -l \"import os\" {} +",
            "find . -type f -name *.py@q -exec grep -l «import os»@q {} +",
        ),
        (
            "python3 - <<'EOF'\nimport sys\nprint(sys.argv)\nEOF",
            "python3 - <<EOF@q«import sys\\nprint(sys.argv)\\n» [sh]",
        ),
        (
            "cd app && cargo build --release 2>&1 | tail -n 20",
            "cd app && cargo build --release 2>&1 | tail -n 20 [sh]",
        ),
        ("sed -n '1,20p' src/main.rs", "sed -n 1,20p@q src/main.rs"),
        ("echo $((RANDOM % 10))", "echo «$((RANDOM % 10))»@a [sh]"),
        (
            "for f in *.rs; do wc -l \"$f\"; done",
            "for:f in *.rs@g ; wc -l $f@qv ~~for [sh]",
        ),
        (
            "test -f x && echo yes || echo no",
            "test -f x && echo yes || echo no [sh]",
        ),
        (
            "[ -d target ] && rm -rf target",
            "[ -d target ] && rm -rf target [sh]",
        ),
        (
            "export PATH=/opt/bin:$PATH",
            "export PATH=/opt/bin:$PATH@v [sh]",
        ),
        ("env -i HOME=/x ls", "env -i HOME=/x ls"),
        (
            "printf '%s\\n' a b > list.txt",
            "printf %s\\\\n@q a b >list.txt [sh]",
        ),
    ]);
}
