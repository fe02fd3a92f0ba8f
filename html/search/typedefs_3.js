var searchData=
[
  ['graphemulation_0',['GraphEmulation',['../cuda__graph_8hpp.html#ad09884432ddbb35b547cf1593a88b485',1,'policytrain::step']]]
];
