//! Python names for MCP tool names.
//!
//! A tool becomes an async function in the sandbox, so its name must be a
//! Python identifier that does not hide anything the code relies on.

/// Python's hard keywords: no function can have these names.
const KEYWORDS: &[&str] = &[
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue", "def", "del",
    "elif", "else", "except", "finally", "for", "from", "global", "if", "import", "in", "is", "lambda", "nonlocal",
    "not", "or", "pass", "raise", "return", "try", "while", "with", "yield",
];

/// The names of Python 3.11's builtins module (dunders aside): a tool must not
/// hide `print`, `len` or `Exception` from the code.
const BUILTINS: &[&str] = &[
    "ArithmeticError",
    "AssertionError",
    "AttributeError",
    "BaseException",
    "BaseExceptionGroup",
    "BlockingIOError",
    "BrokenPipeError",
    "BufferError",
    "BytesWarning",
    "ChildProcessError",
    "ConnectionAbortedError",
    "ConnectionError",
    "ConnectionRefusedError",
    "ConnectionResetError",
    "DeprecationWarning",
    "EOFError",
    "Ellipsis",
    "EncodingWarning",
    "EnvironmentError",
    "Exception",
    "ExceptionGroup",
    "FileExistsError",
    "FileNotFoundError",
    "FloatingPointError",
    "FutureWarning",
    "GeneratorExit",
    "IOError",
    "ImportError",
    "ImportWarning",
    "IndentationError",
    "IndexError",
    "InterruptedError",
    "IsADirectoryError",
    "KeyError",
    "KeyboardInterrupt",
    "LookupError",
    "MemoryError",
    "ModuleNotFoundError",
    "NameError",
    "NotADirectoryError",
    "NotImplemented",
    "NotImplementedError",
    "OSError",
    "OverflowError",
    "PendingDeprecationWarning",
    "PermissionError",
    "ProcessLookupError",
    "RecursionError",
    "ReferenceError",
    "ResourceWarning",
    "RuntimeError",
    "RuntimeWarning",
    "StopAsyncIteration",
    "StopIteration",
    "SyntaxError",
    "SyntaxWarning",
    "SystemError",
    "SystemExit",
    "TabError",
    "TimeoutError",
    "TypeError",
    "UnboundLocalError",
    "UnicodeDecodeError",
    "UnicodeEncodeError",
    "UnicodeError",
    "UnicodeTranslateError",
    "UnicodeWarning",
    "UserWarning",
    "ValueError",
    "Warning",
    "ZeroDivisionError",
    "abs",
    "aiter",
    "all",
    "anext",
    "any",
    "ascii",
    "bin",
    "bool",
    "breakpoint",
    "bytearray",
    "bytes",
    "callable",
    "chr",
    "classmethod",
    "compile",
    "complex",
    "copyright",
    "credits",
    "delattr",
    "dict",
    "dir",
    "divmod",
    "enumerate",
    "eval",
    "exec",
    "exit",
    "filter",
    "float",
    "format",
    "frozenset",
    "getattr",
    "globals",
    "hasattr",
    "hash",
    "help",
    "hex",
    "id",
    "input",
    "int",
    "isinstance",
    "issubclass",
    "iter",
    "len",
    "license",
    "list",
    "locals",
    "map",
    "max",
    "memoryview",
    "min",
    "next",
    "object",
    "oct",
    "open",
    "ord",
    "pow",
    "print",
    "property",
    "quit",
    "range",
    "repr",
    "reversed",
    "round",
    "set",
    "setattr",
    "slice",
    "sorted",
    "staticmethod",
    "str",
    "sum",
    "super",
    "tuple",
    "type",
    "vars",
    "zip",
];

/// Names the sandbox runner itself puts in the code's globals.
pub const RUNNER_NAMES: &[&str] = &["ToolError", "TOOLS", "search_tools", "PACKAGES"];

/// True for a plain ASCII Python identifier.
pub fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) if c == '_' || c.is_ascii_alphabetic() => {}
        _ => return false,
    }
    chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

/// True when a function named `name` would hide something: a keyword, a
/// builtin, a dunder or a name the runner defines.
pub fn is_reserved(name: &str) -> bool {
    KEYWORDS.contains(&name)
        || BUILTINS.contains(&name)
        || RUNNER_NAMES.contains(&name)
        || (name.len() >= 4 && name.starts_with("__") && name.ends_with("__"))
}

/// The Python name of an MCP tool name: every character that cannot be in an
/// identifier becomes `_`, a leading digit gets a `_` before it, and a name
/// that would hide something gets a trailing `_`.
pub fn python_name(mcp_name: &str) -> String {
    let mut name: String =
        mcp_name.chars().map(|c| if c == '_' || c.is_ascii_alphanumeric() { c } else { '_' }).collect();
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        name.insert(0, '_');
    }
    if is_reserved(&name) {
        name.push('_');
    }
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_are_not_identifiers_are_renamed() {
        assert_eq!(python_name("get-weather"), "get_weather");
        assert_eq!(python_name("with.dots"), "with_dots");
        assert_eq!(python_name("9lives"), "_9lives");
        assert_eq!(python_name("naïve"), "na_ve");
        assert_eq!(python_name(""), "_");
    }

    #[test]
    fn names_that_would_hide_something_get_a_trailing_underscore() {
        for (mcp, py) in [
            ("class", "class_"),
            ("print", "print_"),
            ("__init__", "__init___"),
            ("__builtins__", "__builtins___"),
            ("ToolError", "ToolError_"),
            ("TOOLS", "TOOLS_"),
            ("search_tools", "search_tools_"),
            ("PACKAGES", "PACKAGES_"),
            ("len", "len_"),
        ] {
            assert_eq!(python_name(mcp), py, "{mcp}");
        }
    }

    #[test]
    fn ordinary_names_are_kept() {
        assert_eq!(python_name("add"), "add");
        assert_eq!(python_name("create_issue"), "create_issue");
        assert!(is_identifier(&python_name("a b c")));
    }
}
