//! The service core: request → decision → sandboxed run → ToolResult → trace.
