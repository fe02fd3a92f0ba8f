var indexSectionsWithContent =
{
  0: "abcdefghiklmnoprstuvwxy~",
  1: "abcdefghilmnoprst",
  2: "abcdefghilmnoprstw",
  3: "abcdefghiklmnoprstuw~",
  4: "abcdefghiklmnoprstuvwxy",
  5: "acdgiopsv",
  6: "acdklmntuw",
  7: "aeilnorsw",
  8: "p",
  9: "p"
};

var indexSectionNames =
{
  0: "all",
  1: "classes",
  2: "files",
  3: "functions",
  4: "variables",
  5: "typedefs",
  6: "enums",
  7: "enumvalues",
  8: "pages",
  9: "concepts"
};

var indexSectionLabels =
{
  0: "All",
  1: "Classes",
  2: "Files",
  3: "Functions",
  4: "Variables",
  5: "Typedefs",
  6: "Enumerations",
  7: "Enumerator",
  8: "Pages",
  9: "Concepts"
};

