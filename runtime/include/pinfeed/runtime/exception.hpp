#pragma once
/// @file exception.hpp
/// The root of pinfeed's exceptions. Every exception pinfeed throws can be caught in one clause as
/// a `pinfeed::error`, and still by the standard base that fits it:
///
///     try { ... }
///     catch (const pinfeed::sample_error& e) { /* one sample: e.index(), e.stage(), e.path() */ }
///     catch (const pinfeed::error& e)        { /* anything else pinfeed threw: e.what() */ }
///     catch (const std::bad_alloc&)          { /* out of memory: passes through unchanged */ }
///
/// `pinfeed::error` is not a std::exception itself: each concrete type derives from exactly one
/// standard exception (pinfeed::invalid_argument from std::invalid_argument, and so on) and from
/// `pinfeed::error`, so `catch (const std::exception&)` stays unambiguous. README's "Errors" lists
/// each type, when it is thrown, and what passes through unchanged (std::bad_alloc, and exceptions
/// that are not std::exceptions thrown by the caller's own callbacks).

#include <stdexcept>
#include <string>

namespace pinfeed {

/// The base of every exception pinfeed throws (std::bad_alloc aside). what() is the message.
class error {
 public:
  virtual ~error() = default;
  /// The message, as std::exception::what() of the same object gives it.
  [[nodiscard]] virtual const char* what() const noexcept = 0;

 protected:
  error() = default;
  error(const error&) = default;
  error& operator=(const error&) = default;
};

namespace detail {
/// A pinfeed::error that is also the standard exception `Std` (one override of what() serves both).
template <class Std>
class standard_error : public Std, public error {
 public:
  explicit standard_error(const std::string& message) : Std(message) {}
  explicit standard_error(const char* message) : Std(message) {}
  [[nodiscard]] const char* what() const noexcept override { return Std::what(); }
};
}  // namespace detail

/// A bad option, argument, name or input text: the message names the value and what was expected.
class invalid_argument : public detail::standard_error<std::invalid_argument> {
 public:
  using standard_error::standard_error;
};

/// An index, a position or a count outside what the object holds.
class out_of_range : public detail::standard_error<std::out_of_range> {
 public:
  using standard_error::standard_error;
};

/// A size beyond what a container of pinfeed can hold (tensor_shape's extents).
class length_error : public detail::standard_error<std::length_error> {
 public:
  using standard_error::standard_error;
};

/// A call in the wrong state (an empty batch read, a trace asked of a loader that records none).
class logic_error : public detail::standard_error<std::logic_error> {
 public:
  using standard_error::standard_error;
};

/// A failure outside the caller's control: a file, the network, the system, a worker pool.
class runtime_error : public detail::standard_error<std::runtime_error> {
 public:
  using standard_error::standard_error;
};

}  // namespace pinfeed
