var searchData=
[
  ['policytrain_20api_20reference_0',['policytrain API reference',['../index.html',1,'']]]
];
