#pragma once

namespace troupe {

/// Whether byte b continues a UTF-8 character (10xxxxxx).
constexpr auto is_utf8_continuation(unsigned char b) -> bool { return (b & 0xC0) == 0x80; }

} // namespace troupe
