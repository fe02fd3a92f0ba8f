var dir_37c14ea75b781f9d5cfd7265935c6b21 =
[
    [ "digest.hpp", "digest_8hpp.html", "digest_8hpp" ]
];