"""Requests written in another language, read in English.

People ask in their own language ("qué hora es en Lima", "zeige mir die
Dateien im Ordner src"); the catalog's words are English. A request with
enough words of the table below is read word by word in English before
``search_query.py`` (which loads this file from beside it) reads it; any
other request is left as it is. Scripts that write no English (Chinese,
Japanese, Korean, Russian, Hindi, Arabic) have a table of their own, read
wherever its words stand.
"""

import re
import unicodedata

# Words of other languages (Spanish, French, German, Portuguese, Italian;
# fewer of Dutch, Polish and Swedish) for what the reference servers do,
# each line "english: words". A query
# whose words of these count FOREIGN_LEAST is read with each in English
# ("qué hora es en Lima" as "what time is in Lima"); a word counts 1, or
# half when marked "*": a word English also has, or a name, a command or
# an abbreviation ("est", "du", "todo"). Accents may be left out ("que",
# "groesse").
FOREIGN_LEAST = 2
FOREIGN_WORDS = """
file: archivo fichero datei ficheiro arquivo fichier bestand plik pliku fil filen dosya dosyayı dosyası soubor souboru dosyanın fișierul fișier fisierul tệp dosyalarını dosyaları dosyalar dosyaların dosyasını dosyasini
files: archivos ficheros dateien ficheiros arquivos fichiers bestanden pliki plików filer filerna souborů soubory fișierele fișiere tệp_tin berkas tiedostoja tiedostot fájlok fájlokat
folder: carpeta directorio dossier* répertoire ordner verzeichnis pasta* diretório cartella mappen mapp katalogu map* klasör klasörü klasöründe klasörde složka složce složku dizinin dizini složky kansiossa kansio kansioon klasörüne katalogów katalogi mappában mappát mappák
folders: carpetas directorios dossiers répertoires verzeichnisse pastas diretórios cartelle mappar foldery kansioita kansiot složkám složek
read: leer lee* léeme lire lis lesen lies* ler leia leggi lees lezen przeczytaj czytaj odczytaj läs đọc baca citește
see: ver* voir sehen vedere
show: muestra muéstrame mostrar muestrame affiche afficher montre montrer zeige zeig anzeigen mostre mostra toon tonen pokaż wyświetl visa ukaž ukažte göster näytä
write: escribir escribe écrire écris schreiben schreibe escrever escreva scrivi schrijf schrijven napisz skriv
save: guardar guarda enregistrer enregistre sauvegarder sauvegarde speichern speichere salvar salve* gravar grave* salva opslaan zapisz spara uložte ulož uložit
edit: editar edita modificar modifica modifier* modifie bearbeiten bearbeite edite alterar altere bewerk bewerken wijzig wijzigen edytuj redigera corrige corriger corregir corrija korrigiere korrigieren correggi uprav upravit
change: cambiar cambia ändern ändere mudar mude verander veranderen zmień ändra
replace: reemplazar reemplaza remplacer remplace ersetzen ersetze substituir substitua sostituisci vervang vervangen zamień ersätt
list: listar enumera lister auflisten liste* elenca listele listeyi vypiš seznam
create: crear crea créer crée erstellen erstelle anlegen criar crie aanmaken utwórz stwórz skapa oluştur oluşturun banao banaao banaiye vytvoř vytvořit creează creeaza maak aan_maken
new: nuevo nueva nouveau nouvelle neu neue neuen neues neuer novo nova* nuovo nuova nieuw nieuwe nowy nowa nowe ny nya yeni naya nayi naye noi* mới nową novou nový nové nová
delete: ta_bort radera togli togliere rimuovi borrar borra quitar quita eliminar elimina supprimer supprime effacer efface löschen lösche entfernen entferne apagar apague excluir exclua remover* remova cancella verwijder verwijderen usuń skasuj lösch sil silin xoá xóa hapus șterge smaž smazat odstraň
move: mover mueve déplacer déplace verschieben verschiebe mova sposta verplaats verplaatsen przenieś flytta přesuň přesunout mută muta mută_fișierul taşı taşıyın verschieb
rename: renombrar renombra renommer renomme umbenennen benenne renomear renomeie rinomina hernoem hernoemen byt_namn zmień_nazwę renomeia renomeie_o přejmenuj yeniden_adlandır adlandır adlandırın adlandirin
search: buscar busca chercher cherche rechercher recherche suchen suche procurar procure* busque cerca zoek zoeken szukaj wyszukaj sök durchsuche durchsuchen dhundo dhoondo dhundho cari* tìm tìm_kiếm caută such_mal
find: encuentra encontrar trouver trouve finden finde encontre trova vinden znajdź hitta bul bulur bulun bulabilir vind najdi najít
size: tamaño tamaños taille größe grösse tamanho dimensione pesa pèse wiegt pesan grootte rozmiar storlek boyutu boyut velikost velikosti velikostmi
time: spät hora horas horaria heure heures horaire uhrzeit zeit horário tempo* ora* ore* tijd czas godzina zamanı saat* giờ óra* waktu pukul* aika kello hodin hodina
now: ahora maintenant jetzt agora* adesso teraz abhi abhee şimdi şu_an
current: actual* actuelle actuel aktuelle aktuell atual attuale huidige aktualny aktualna nuvarande
zone: zona* fuseau zeitzone fuso
convert: convertir convierte convertis umrechnen umwandeln rechne converter* converta converti
date: fecha datum* tarihi tarih
what: qué que* quoi che* wat vad kaç kolik
what's in the: o_que_tem_na o_que_tem_no o_que_há_na qué_hay_en_la qué_hay_en_el wat_staat_er_in_de wat_zit_er_in_de co_je_ve co_je_v qu'y_a-t-il_dans_le qu'y_a-t-il_dans_la qu'est-ce_qu'il_y_a_dans_le qu'est-ce_qu'il_y_a_dans_la
what files: che_file
which: cuál cuáles quelle quel quels quelles welche welcher welches qual quais quale welke który która które vilken vilka
where: dónde où wo onde dove* waar gdzie kahan kahaan
who: quién quiénes qui* wer quem chi kto vem
how: cómo cuánto cuántos comment* combien wie wieviel como* quanto quantos hoe jak* hur
is: es* est* ist* é è sono
in: en* dans im* em nella nel în
of: de* del* du* des* von da* dos* di van*
the: el* la* los las le* les* der das* dem gli il* lo* den* het*
a: un* una une ein eine einen um* uma een*
and: und et* y* e* și và ile
with: con* avec mit* com* sem*
without: sin sans ohne senza
for: para pour* für
my: mi* mis* mon* ma* mes mein meine meinen meu minha meus minhas mio mia miei
several: varios varias plusieurs mehrere vários várias diversi diverse
together: a_la_vez à_la_fois gleichzeitig de_uma_vez alla_volta insieme en_une_seule_fois d'un_seul_coup
open: abre abra abrir ouvre ouvrir öffne öffnen apri aprire öppna otevři otevřít avaa načti načíst otwórz otwórzcie
nodes: nós nodos nœuds knoten nodi noderna noder knooppunten uzly uzlů düğümleri düğümler węzły węzłów
called: chamados chamado chamada llamado llamados llamada appelé appelés appelée genannt chiamato chiamati
browser: navegador navigateur
url: endereço dirección
all: todo* todos todas tout* tous toutes alle alles tutti tutte wszystko wszystkie allt alla všechny všechno tüm
me: moi mir mich
i: je yo* ich eu* io*
want: quiero veux möchte quero voglio
please: bitte
contents: contenido contenu inhalt conteúdo contenuto obsah obsahu nội_dung isinya conținutul
names: nombres noms namen nomes nomi názvy názvem nevei nevek nazwach nazwami nazwy
just: solo* juste nur apenas simplement simplemente semplicemente tylko
memory: memoria mémoire gedächtnis memória geheugen pamięć pamięci minne minnet memori bộ_nhớ hafızadaki hafıza hafızadan paměti paměť
stored: guardado guardada guardados guardadas gespeichert gespeicherte gespeicherten enregistré enregistrés sauvegardé armazenado armazenados salvato salvati memorizzato
something: algo quelque_chose etwas qualcosa alguma_coisa
remember: recuerda recordar souviens rappelle retiens erinnere merke merk merk_dir merke_dir lembre lembrar ricorda onthoud zapamiętaj kom_ihåg zapamatuj zapamatuj_si
person: persona* personne pessoa persoon osoba osobę osobu
relation: relación beziehung relação relazione relatie relacja relację relationen ilişkisini ilişki ilişkiyi quan_hệ hubungan relația vztah vztahu powiązanie
note: nota* notiz anota anotar apunta apuntar notiere notier noter* anote anotare annota notitie noteer notatka anteckning notatkę notatki poznámku poznámka lege_fest halte_fest
graph: grafo graphe wissensnetz wissensgraph graf grafiğinin grafiği
image: imagen bild imagem immagine afbeelding obraz obrazek bilder foto* fotos* fotka
compress: comprimir compresser komprimieren comprimi
environment: entorno environnement umgebung ambiente*
variables: variablen
tree: árbol arbre baum árvore albero ağaç boom drzewo drzewa drzewie
allowed: permitidos autorisés erlaubt erlaubten permitidas consentite le_droit_de le_droit_d el_derecho_de o_direito_de erişim erişimin
repeat: repite répète wiederhole repita ripeti toista repetir repetí repite_exactamente herhaal repíteme repiteme répète-moi
keep: behåll lascia lascialo lasciala lasciali mantieni conserva mantén mantener mantenha garde gardez behalte behalten bewaar behoud zachowaj nech
rest: resto reste zbytek
information: información informations informationen informação informazioni informazione informatie informacja bilgi
name: nombre nom* nome
entity: entidad entité entität entidade entità entiteit entiteten encja encję encji entitě
text: texto texte testo tekst szöveges
same: mismo misma même mesmo mesma stesso stessa gleiche gleichen selbe selben
exactly: exactamente exactement genau exatamente esattamente tal_cual tel_quel telle_quelle
return back: rimandami rimanda devuelve devuélveme devuélvelo devuelva devuélvame devolver renvoie renvoyer devolva restituisci zurückgeben
send: mando envío envoie schicke sende envio
forget: olvida olvidar olvídate oublie oublier vergiss vergessen esqueça esquecer dimentica vergeet zapomnij glöm zapomněl zapomeň zapomenout
add: añade añadir agrega agregar ajoute ajouter füge hinzufügen ergänze adicione adicionar acrescente aggiungi voeg_toe toevoegen dodaj lägg_till voeg acrescenta acrescentar přidej jodo ekle
record: ficha fiche eintrag scheda kaydına kaydı
link: kopplingen koppling länken vincula vincular conecta conectar relie lier verknüpfe verknüpfen verbinde verbinden ligue ligar conecte collega* koppel koppelen verbind połącz
simulate: simula* simular simule* simuler simuliere simulieren simuleer symuluj simulera symulowane symulowany simüle simüle_edilmiş simulovaný simuluj simulerade simulerad gesimuleerde gesimuleerd simulované simulasikan simulovat simulovej
ask: pide pedir pregunta demande demander frag fragen fragt peça chiedi sormasını sorsun
form: formulario formulaire formular formulário modulo*
user: usuario utilisateur benutzer nutzer usuário utente
server: servidor serveur máy_chủ palvelin sunucu sunucunun sunucuyu
weather: clima* météo meteo* wetter qué_tiempo_hace que_tiempo_hace pogodowe pogoda pogodę
structured: estructurado estructurada estructurados structuré structurée strukturiert strukturierte estruturado estruturada strutturato strutturata ustrukturyzowanej ustrukturyzowane ustrukturyzowany ustrukturyzowana strukturerat strukturerad strukturerade
output: saída salida sortie ausgabe uscita wyjściowym wyjściowy wyjściowe utdata
tiny: pequeña pequeño petite* petit* klein kleines kleine pequena pequeno piccola piccolo
sum: suma* sumar somme additionne addiere summe soma some* somma optellen tel_op bij_elkaar_op bij_elkaar_optellen topla toplar toplam toplamı zsumowanie zsumuj zsumować zsumowania
number: número números zahl zahlen numero* liczby liczb kwot kwoty kwota kwotę
notifications: notificaciones benachrichtigungen notificações notifiche powiadomieniami powiadomienia powiadomień bildirimleri bildirimler bildirimlerini
resource: recurso ressource risorsa kaynak risorse recursos ressources erőforrásra erőforrás tài_nguyên sumber_daya resurssi
message: mensaje nachricht mensagem messaggio viesti
long: largo* lange* longa lunga długą długa długi długo uzun
operation: operación opération vorgang operação operazione operację operacja operacji işlem işlemi
progress: progreso progression* fortschritt progresso avanzamento postęp postępie postępu ilerleme
model: modelo modèle modell modello
back: zurück indietro terug vissza takaisin
give: gib gibt donne dai* geef daj ge* adj
whole: completo* komplette komplett vollständig ganz ganze ganzen ganzes entier entière inteiro intero intera celý celou celá poore poora tamamını tamamı volledig volledige całe całego
completely: por_completo complètement helt helemaal całkowicie del_tutto completamente compleet úplně
existing: existente existante vorhandene existierende bestaande befintliga istniejący esistente existující bestehenden bestehende bestehender
root: raíz raíces racine racines wurzel raiz radice radici
log: protokoll logg loggen
this: este esta ce* cette dieser diese diesen dieses isto questo questa
she: ella elle sie* ela lei*
speaks: habla parle spricht fala parla
lives: vive vit lebt abita wohnt habite
colleague: colega* collègue kollege kollegin
data: datos dados données daten dati
about: sobre acerca tentang despre
between: mellan entre* zwischen tra* tussen między arasındaki arasında giữa antara mezi
people: personerna personas personnes personen persone mensen osoby
line: zeile ligne línea linha riga
related to: relacionada_com relacionado_com relacionadas_com relacionados_com relacionado_con relacionada_con relativo_a lié_à
anything: qualquer_coisa cualquier_cosa n'importe_quoi irgendetwas qualsiasi_cosa
tool: herramienta outil werkzeug ferramenta strumento
test: tester testen testar testare przetestować przetestuj testuj comprobar comprueba
connection: connexion conexión verbindung conexão connessione
there are: ci_sono il_y_a gibt_es hay*
contains: contiene contient enthält contém
every: cada chaque jede jeder jedes ogni
knowledge: conocimiento connaissance wissen conhecimento conoscenza
research: onderzoek badanie badania forskning recherche_approfondie araştırma výzkum výzkumný djupresearch riset tiefenrecherche
research question: onderzoeksvraag forskningsfråga
research task: onderzoeksopdracht onderzoekstaak forskningsuppgift
may: darfst dürfen darf
can: puedes peux kannst podes puoi możesz
married: getrouwd żonaty zamężna gift*
birthday: geburtstag cumpleaños anniversaire aniversário compleanno verjaardag urodziny födelsedag
topic: temat onderwerp thema tema* tématu téma tématem
run: lance lancer starte uruchom voer_uit çalıştır spusť başlat
temperature: temperatura température temperatur temperatuur
humidity: umidade humedad humidité feuchtigkeit umidità luchtvochtigheid wilgotność
mentions: erwähnt erwähnen menciona mentionne menziona vermeldt
entities: entiteterna entiteter entiteiten entidades* entités entitäten entity* entități entitati entitas podmioty podmiotów
knowledge graph: kunskapsgrafen kunskapsgraf kennisgraaf graf_wiedzy grafu_wiedzy grafie_wiedzy znalostní_graf bilgi_grafiğinin bilgi_grafiği
file info: dateiinfo dateiinfos dateiinformationen
modified: geändert geänderte modificado modificada modifié modifiée modificato gewijzigd zmieniony zmodyfikowany ändrad değiştirilme değiştirildi
modification date: änderungsdatum fecha_de_modificación date_de_modification data_di_modifica wijzigingsdatum data_modyfikacji ostatniej_modyfikacji datę_modyfikacji
permissions: rechte berechtigungen permisos droits* permessi permissões uprawnienia behörigheter rechten* izin iznin permissão permissões_de permisión
metadata: metadaten metadatos métadonnées metadados metadati
observations: waarnemingen observationer obserwacje observaciones observações osservazioni
observation: waarneming observation* obserwacja obserwację observación observação osservazione beobachtung observationen remarque uwagę uwaga
from: från
enable: włącz włączyć zapnij zapni zapnout etkinleştir slå_på aktiviere aktivieren activa activar active* activer ativa ativar attiva attivare aç
logging: logowanie logování loglama loggning
query: sorgu sorgusu dotaz
when: kdy ne_zaman wann quando cuándo quand
created: vytvořen vytvořený vytvořeno oluşturuldu erstellt erstellte creado creada criado criada créé créée creato creata skapad utworzony oluşturulma
client: istemci istemcimin cliente* klient
log messages: loggmeddelanden loggmeddelandena logmeldingen logberichten
links: liens enlaces ligações collegamenti linki länkar liên_kết tautan linków
relations: vztahy relaciones relations* beziehungen relações relazioni relaties relacje vazby vazeb powiązaniami powiązania
subscription: abonelik aboneliği suscripción abonnement* assinatura iscrizione subskrypcja prenumeration feliratkozási feliratkozás
updates: güncellemeler güncellemelerini actualizaciones mises_à_jour aktualisierungen atualizações aggiornamenti frissítéseket frissítések uppdateringar
already saved: já_está_salvo já_está_salva ya_está_guardado ya_está_guardada
unchanged: unverändert unveränderten ongewijzigd inalterado inchangé inchangée invariato oförändrad niezmieniony sellaisenaan
no sizes: ingen_storlek sin_tamaño sans_taille ohne_größe sem_tamanho
directories: hakemistoihin hakemistot hakemistoja dizinlere dizinler
access: pääsy pääsyä acessar acesso accéder acceder zugreifen dostęp dostępu přístup přístupu
seconds: saniye sekunden segundos secondes secondi sekund sekunder
switch: schakel schakelen
make: gör
structure: yapısını yapı structuur struktur estructura
subfolders: alt_klasörleriyle alt_klasörler alt_klasörleri podsložkách podsložky podsložek
brother: broer bruder hermano frère irmão fratello brat bror
sister: zus schwester hermana sœur irmã sorella siostra syster
environment variables: biến_môi_trường variabel_lingkungan variabilele_de_mediu umgebungsvariablen umgebungsvariable
notes: catatan ghi_chú notițe
disable: vypni vypnout dezactivează kapcsold_ki stänger_av stäng_av stänga_av désactive désactiver désactivez
remembered: zapamatoval zapamatovala
records: záznamy
what time: hány_óra pukul_berapa jam_berapa mấy_giờ kitne_baje kitna_baja kya_time hoe_laat
reference: hivatkozást hivatkozás tham_chiếu referensi verwijzing referência referencia
sample: mẫu contoh
by name: op_naam podle_jména
exact: přesnými přesný přesně
simulated: szimulált låtsas simulierte simuliert simulierten simulés simulées simulé
deep: mendalam
resource reference: resourceverwijzing
directory: hakemistossa hakemisto
overwrite: überschreiben überschreibe sobrescribir sobrescreva écraser sovrascrivi overschrijf
specific: konkrétní
names only: bara_namnen nur_die_namen solo_los_nombres seulement_les_noms alleen_namen
verbatim: ohne_etwas_zu_ändern sin_cambiar_nada sans_rien_changer senza_cambiare_nulla
together with: razem_z junto_con zusammen_mit insieme_a
creation: erstellung utworzenia
its: jego jej
deprecated: veraltet veralteten veraltete veraltetes
only: jen jenom bara alleen
toggle: slå_av/på slå_på/av växla
subscribed: prenumererade prenumererad
resources: resurser zasobów zasoby
question: soru sorular
trigger: tetikle tetiklesin
archive: arşiv arşive
single: único única
node: nodo nœud knooppunt węzeł uzel
both: oba beide ambos båda
already: už schon déjà redan finns_redan pehle_se
know: znáš kennst
as: als
messages: meddelandena meddelanden meddelande
connect: koppla_ihop koppla
mentioned: wspominał wspomniał parlé erzählt
ever: kiedykolwiek
whether: czy
top: översta
level: nivån nivå
recursively: rekurencyjnie
manager: supérieure_hiérarchique supérieur_hiérarchique
deep research: pesquisa_aprofundada
creation time: datę_utworzenia data_utworzenia
someone: jemandem
named: adlı
a new note: yeni_bir_not bir_not
subsidiary: tochtergesellschaft tochterfirma
schema: schematem schemat schematu utdataschema
logs: journaux
extension: příponou přípona příponu
plus: più
last: laatst
"""

# Words of languages in other scripts (Chinese, Japanese, Korean, Russian,
# Hindi, Arabic), each line "english: words". These scripts write no
# English, so one such word in a request is enough: each is read in
# English wherever it stands, the longest first (Chinese and Japanese
# write no spaces; a Russian word's ending stays as a word of its own).
SCRIPT_WORDS = """
what is in: что_лежит_в что_находится_в что_есть_в
directory tree: 目录树 目錄樹 ディレクトリツリー
whole: 整个 整個 पूरा
what time: 几点 幾點 何時 몇시 몇_시 который_час कितने_बजे котра_година
tree: ツリー 树形 트리 дерево 树状
structure: 構造 结构 구조 структур
subfolders: サブフォルダ 子文件夹 하위_폴더 подпапк υποφακέλ
all: 全部 すべて 모두 все 所有
knowledge graph: 知識グラフ 知识图谱 지식_그래프 граф_знаний графа_знаний
new: 新しい 新的 新 새로운 новый новую новое नया नई नए 새
person: 人物 人 사람 человек
register: 登録 注册 등록 зарегистрируй
entity: сущность сущности 实体 エンティティ 엔티티 οντότητ एंटिटी
completely: полностью 完全に 完全 완전히 पूरी_तरह
form: フォーム 表单 양식 форму форма نموذج
input: 入力 输入 입력 ввод إدخال
user: ユーザー 用户 사용자 пользовател مستخدم
server: サーバー 服务器 서버 сервер שרת خادم सर्वर
request: リクエスト 请求 요청 запрос 要求 בקשת अनुरोध
message: メッセージ 消息 메시지 сообщени
annotated: アノテーション付き 带注释的 주석이_달린 аннотированн
annotations: アノテーション 注释 注解 주석 аннотаци
sampling: サンプリング 采样 샘플링 сэмплинг דגימה सैंपलिंग सैम्पलिंग
prompt: プロンプト 提示词 프롬프트 промпт 提示
error: エラー 错误 오류 ошибк
contains: 含む 包含 포함 들어간 содерж
allowed: アクセスできる アクセス可能 可以访问 能访问 접근_가능한 доступны доступные 허용된 允许的 許可された разрешённ разрешенн επιτρέπ дозволен 許可されている
relation: 关系 関係 관계 отношени связь संबंध
related to: связан
add: 添加 追加 추가 добавь πρόσθεσ
between: 之间 の間 사이의 между ανάμεσα
which: どれ 哪些 哪个 어떤 какие какой
roots: ルート 根目录 루트
client: クライアント 客户端 클라이언트 клиент
long running: 时间的 時間のかかる 오래_걸리는 долг
progress: 进度 進捗 プログレス 진행 прогресс คืบหน้า प्रगति
notification: 通知 알림 уведомлен
operation: 处理 処理 操作 작업 операци ऑपरेशन
resource: リソース 资源 리소스 ресурс
links: リンク 链接 링크 ссылк
return: 返して 返回 반환 верни
run: 运行 执行 実行 실행 запусти
tool: 工具 ツール 도구 инструмент
test: 测试 テスト 테스트 тест
time: 时间 時間 時刻 시간 время времени समय الوقت الساعة година
now: 现在 現在 지금 сейчас अभी الآن зараз
timezone: 时区 時區 タイムゾーン 시간대 часовой_пояс
convert: 换算 转换 変換 변환 перевести переведи конвертируй
file: 文件 ファイル 파일 файл फ़ाइल फाइल ملف
folder: 文件夹 資料夾 フォルダ フォルダー 폴더 папк फ़ोल्डर مجلد φάκελ फोल्डर
directory: 目录 ディレクトリ 디렉터리 каталог
delete: 删除 削除 삭제 удали удалить हटाओ احذف हटा_दो 지워 消して 消す
create: 创建 作成 생성 создай создать बनाओ 作って 作る बना बनाएं बनाइए 만들어
read: 读取 読んで 読み 읽어 прочитай прочти पढ़ो
show: 显示 表示 見せて 给我看 보여줘 보여 покажи दिखाओ 看看
list: 列出 一覧 목록 список सूची
search: 搜索 查找 探して 検索 검색 찾아 найди поиск поищ खोजो ابحث ढूंढो ढूँढो ढूंढ़ो ढूंढिए ढूँढ ढूंढ
remember: 记住 覚えて 기억해 запомни याद_रखो تذكر
memory: 记忆 記憶 기억 메모리 памят मेमोरी
research: 研究 調査 调查 연구 조사 исследован शोध ค้นคว้า بحث रिसर्च 调研
simulate: 模拟 シミュレート 시뮬레이션 смоделируй симулируй симуляц จำลอง
enable: включи включить 有効にして 启用 켜줘 활성화
logging: логирован журналирован ロギング 日志 로깅
random: случайн ランダム 随机 랜덤 무작위
levels: уровн レベル 级别 레벨
word: 단어 単語 单词 слово
entries: 항목 записи エントリ 条目
image: 图片 画像 이미지 картинк изображени तस्वीर صورة
size: 大小 サイズ 大きさ 크기 размер आकार حجم साइज़ साइज
modified: 修改 変更 수정 изменя बदला
when: 什么时候 いつ 언제 когда कब متى
rename: 重命名 名前を変更 이름_변경 переименуй 이름을_바꿔
move: 移动 移動 이동 перемести
echo: 回显 エコー 에코
environment variables: 环境变量 環境変数 환경_변수 переменные_окружения
together: 한꺼번에 一度に 一次性 одновременно
nodes: 노드 ノード 节点 узлы вузли
by name: 이름으로 名前で 按名称 по_имени за_назвою
open: 열어 開いて 打开 открой відкрий
folders: φάκελοι
files: αρχεί
find: βρες 找出
observation: παρατήρησ 観察
end with: τελειώνουν
model: מודל модель модели
link: رابط σύνδεσ
browser: متصفح
open in: فتح
weather: 天気 天气 날씨 погод
temperature: 気温 温度 기온 температур
humidity: 湿度 습도 влажност
keep: 残して 残す 남겨 оставь
only: だけ
data: بيانات
without: بدون
what time is: сколько_будет
simulated: تجريبي नकली имитац
deep: معمّق معمق गहन
phases: مراحل
works at: δουλεύει
project: έργο
name: 이름
change: 바꿔
sum: 相加 总和 合計 합계 더해 足す 足して
llm: एलएलएम 大模型
anything mentioning: что-нибудь_про что-то_про что-нибудь_о
generate: 生成 сгенерировать сгенерируй
steps: चरण
creation time: 作成日時
permissions: 権限
information: जानकारी
disable: отключи выключи отключить 关掉 关闭
updates: обновлен
subscription: подписк 订阅
contents: 里面写了什么 写了什么 中身 내용
edit: исправь исправить 書き換えて 書き換え
line: строку строка строки
unchanged: не_трогай
access: पहुँच
graph: ग्राफ
saved: सेव
fact: факт
mentioned: 話したっけ 話した
introduced to: 介绍给
record: 记录一下
inside: 안에
created: बनाई
long running: 耗时
remove: αφαίρεσε
"""


def _script_words():
    """SCRIPT_WORDS as ``{word: english}`` ("_" in a word: any space)."""
    english = {}
    for line in SCRIPT_WORDS.strip().splitlines():
        meaning, words = line.split(":", 1)
        for word in words.split():
            english.setdefault(word, meaning)
    return english


_SCRIPT = _script_words()
_SCRIPT_WORD = re.compile("|".join(r"\s*".join(map(re.escape, w.split("_")))
                                   for w in sorted(_SCRIPT, key=len, reverse=True)), re.I)
# A match written without its spaces -> the table's word ("몇시" -> "몇_시"),
# by case folding, as matching ignoring case takes letters lower() keeps
# ("ς" and "σ", "µ" and "μ", "ϕ" and "φ").
_SCRIPT_KEY = {w.replace("_", "").casefold(): w for w in _SCRIPT}
_SPACES = re.compile(r"\s+")


def _in_english_word(match):
    """The English of a SCRIPT_WORDS match, apart from its neighbours (the
    match as written when no key of the table is it)."""
    written = _SPACES.sub("", match.group(0))
    key = _SCRIPT_KEY.get(written.casefold())
    return " " + _SCRIPT[key] + " " if key else match.group(0)


# An hour written in a script that writes it after the number ("8点",
# "9時", "3시", Russian "9 утра" with the part of the day): a clock time.
_SCRIPT_HOUR = re.compile(r"(\d{1,2})\s*(?:点|點|時|시|बजे|утра|дня|вечера|ночи)(?:\s*(\d{1,2})\s*分)?")
def _from_scripts(query):
    """``query`` with the words of SCRIPT_WORDS in English, each apart, and
    its hours as a clock writes them."""
    if query.isascii():
        return query
    query = _SCRIPT_HOUR.sub(lambda m: f" {m.group(1)}:{m.group(2) or '00'} ", query)
    return _SCRIPT_WORD.sub(_in_english_word, query)


def _foreign_words():
    """FOREIGN_WORDS as ``{word: (english, how much it counts)}``, each
    word also as written without its accents ("qué" as "que", "größe" as
    "grosse" and "groesse"); a form listed as counting half, or of one or
    two letters, counts half."""
    english, half = {}, set()
    for line in FOREIGN_WORDS.strip().splitlines():
        meaning, words = line.split(":", 1)
        for word in words.split():
            plain = "".join(c for c in unicodedata.normalize("NFKD", word) if not unicodedata.combining(c))
            for form in dict.fromkeys((word.rstrip("*"), plain.rstrip("*"), word.rstrip("*").translate(_UMLAUTS))):
                english.setdefault(form, meaning)
                if word.endswith("*") and form == word.rstrip("*") or len(form) <= 2:
                    half.add(form)
    return {form: (meaning, 0.5 if form in half else 1.0) for form, meaning in english.items()}


# The punctuation of Chinese and Japanese, full width: a mark and a space
# ("打开 行程.txt，看看": the file's name ends at the comma).
_WIDE_MARKS = str.maketrans({"\uff0c": ", ", "\u3001": ", ", "\u3002": ". ", "\uff1a": ": ", "\uff1b": "; ",
                             "\uff1f": "? ", "\uff01": "! ", "\uff08": " (", "\uff09": ") "})
_UMLAUTS = str.maketrans({"ä": "ae", "ö": "oe", "ü": "ue", "ß": "ss"})
_FOREIGN = _foreign_words()


def _phrase_key(text):
    """A phrase as the table writes it: "merk dir" as "merk_dir"."""
    return "_".join(text.lower().split())


# Phrases of the table ("merk_dir": "merk dir", any space between).
_PHRASES = sorted((form for form in _FOREIGN if "_" in form), key=len, reverse=True)
_FOREIGN_PHRASE = re.compile(r"\b(?:" + "|".join(r"\s+".join(map(re.escape, p.split("_"))) for p in _PHRASES)
                             + r")\b", re.I) if _PHRASES else None
# A word of the text, not of a path, a file name or an identifier.
_TEXT_WORD = re.compile(r"(?<![\w/.\\-])[^\W\d_]+(?![\w/\\]|\.\w)")


def _english_of(word, compound=True):
    """What ``word`` (lower case) reads as in English, and how much it
    counts: a word of the table, or one of its forms with up to three more
    letters ("recuerdas", "borraste", "mostrarme": a verb with its ending)
    counting half, or (when ``compound``) a compound of two; None when it
    is none of these."""
    found = _FOREIGN.get(word)
    if found is not None or len(word) < 6:
        return found
    for cut in range(len(word) - 1, max(len(word) - 4, 4), -1):
        stem = _FOREIGN.get(word[:cut])
        if stem is not None and stem[1] == 1.0:
            return stem[0], 0.5
    return _compound(word) if compound and len(word) <= COMPOUND_LONGEST else None


# The longest word read as a compound (the two parts of "ordnerinhalt",
# "dateigrößen"; no part is a compound again).
COMPOUND_LONGEST = 40


def _compound(word):
    """A compound of two words of the table, as German, Dutch and Swedish
    write them ("ordnerinhalt": folder contents; "dateigrößen": file sizes,
    the second with an ending; a joining "s" allowed: "zeitzonenliste"),
    counting as one word; None when it is no such compound."""
    for cut in range(len(word) - 4, 3, -1):
        head = _FOREIGN.get(word[:cut])
        if head is None and word[cut - 1] == "s" and cut > 5:
            head = _FOREIGN.get(word[:cut - 1])
        if head is None or head[1] < 1.0:
            continue
        tail = _english_of(word[cut:], compound=False)
        if tail is not None:
            return f"{head[0]} {tail[0]}", 1.0
    return None


# An hour as German and French write it ("18 Uhr", "18h30"): a clock's.
_LATIN_HOUR = re.compile(r"\b(\d{1,2})\s*(?:Uhr|uhr)\b|\b(\d{1,2})h(\d{2})\b")


def in_english(query, english=None):
    """``query`` with its words of other languages in English when they
    count FOREIGN_LEAST (FOREIGN_WORDS), or when one does and the request
    has at most two words besides its values ("umbenennen: a.txt ->
    b.txt"), or one and a half and at most five ("Rinomina il file 'a' in
    'b'"); else as it is. "zeige mir die Dateien im Ordner src" reads as
    "show me die files in folder src": the capitalised nouns of German are
    no names. ``english(word)``, when given, says a word is English too:
    such a word is read in English only with others of its language."""
    query = _from_scripts(query.translate(_WIDE_MARKS)).replace("\u0130", "I")  # Turkish "İ": "i" and a dot in lower case
    query = _LATIN_HOUR.sub(lambda m: f"{m.group(1) or m.group(2)}:{m.group(3) or '00'}", query)
    said = _TEXT_WORD.findall(query)
    found = {w: _english_of(w.lower()) for w in said}
    count = sum(found[w][1] for w in said if found[w]) + (len(_FOREIGN_PHRASE.findall(query)) if _FOREIGN_PHRASE else 0)
    if count < FOREIGN_LEAST and not (count >= 1 and len(said) <= 2 or count >= 1.5 and len(said) <= 5):
        if count < 1:
            return query
        # An English request with a word of another language in it
        # ("verschiebe bild.png into the folder fotos"): only the words no
        # English speaker writes are read ("todos" is one).
        def alone(match):
            word = match.group(0)
            meaning = found.get(word)
            if meaning is None or meaning[1] < 1.0 or english is not None and english(word.lower()):
                return word
            return meaning[0]
        return _TEXT_WORD.sub(alone, query)
    if _FOREIGN_PHRASE is not None:
        # A match whose lower case is no key ("DİR" lower-cases to two
        # letters) stays as written.
        query = _FOREIGN_PHRASE.sub(lambda m: _FOREIGN.get(_phrase_key(m.group(0)), (m.group(0),))[0], query)
    return _TEXT_WORD.sub(lambda m: (found.get(m.group(0)) or _english_of(m.group(0).lower()) or (m.group(0),))[0], query)
