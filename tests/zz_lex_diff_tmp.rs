#[test]
fn zz_dump_json() {
    let Ok(text) = std::fs::read_to_string("/tmp/lexdiff/in.txt") else { return };
    let mut out = String::new();
    for line in text.lines() {
        let input: String = serde_json::from_str(line).unwrap();
        let v = match agent_exec::lexer::lex(&input) {
            Ok(s) => serde_json::to_value(&s).unwrap(),
            Err(_) => serde_json::Value::Null,
        };
        out.push_str(&v.to_string());
        out.push('\n');
    }
    std::fs::write("/tmp/lexdiff/out.txt", out).unwrap();
}
